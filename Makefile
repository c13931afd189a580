# The two quick-start commands: `make demo` and `make test`. Both create .venv on first use.
# `make compat` runs the compatibility matrix (docs/compatibility.md) in venvs of its own.
# `make dist` builds and checks the sdist and wheel; `make wheel-test` tests that wheel, installed in a venv of
# its own; `make resolve` checks (needs the network) that pip resolves verl-ctx[verl] with verl's engine extras.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# This project's pins for its own machines (the CPU torch build), never published: every pip install here.
CONSTRAINTS := constraints.txt
PIP_INSTALL := -m pip install -q -c $(CONSTRAINTS)

# The verl releases the suite is proven on: the newest in .venv, the oldest in $(VENV_VERL_OLDEST).
VERL_NEWEST ?= 0.9.1
VERL_OLDEST ?= 0.9.0
VENV_VERL_OLDEST := .venv-verl$(subst .,,$(VERL_OLDEST))

# Interpreters for the core and CLI suites: pyenv's newest 3.X.*, else python3.X on PATH. Override with
# e.g. `make compat PY310=/usr/bin/python3.10`.
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $(HOME)/.pyenv)
newest_python = $(or $(shell ls -d $(PYENV_ROOT)/versions/$(1).*/bin/python$(1) 2>/dev/null | sort -V | tail -n 1),$(shell command -v python$(1) 2>/dev/null))
PY310 ?= $(call newest_python,3.10)
PY312 ?= $(call newest_python,3.12)

# The core and CLI suites import no verl module: the CLI composes verl's Hydra config from verl's files and
# checks that ray can be found. So their venvs get ray and verl without its dependencies, hence without torch
# (for Python 3.10 and 3.12 PyPI's torch is a multi-GB CUDA build; the CPU build on disk is for 3.11).
CORE_SUITES := tests/core tests/cli

.PHONY: demo test lint typecheck pytest campaigns bench schemas compat compat-verl-oldest compat-py310 \
	compat-py312 dist wheel-test resolve clean

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python $(PIP_INSTALL) --upgrade pip
	$(BIN)/python $(PIP_INSTALL) -e '.[dev]' 'verl==$(VERL_NEWEST)'
	touch $(STAMP)

demo: $(STAMP)
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m examples.custom_recipe.demo

lint: $(STAMP)
	$(BIN)/ruff check conftest.py src tests tests_resolution benchmarks examples
	$(BIN)/ruff format --check conftest.py src tests tests_resolution benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

# Every suite runs in two processes, a module to a process (pytest-xdist; --dist loadscope sets a module's fixtures
# up once). A Ray test spends half its time waiting (actors starting, servers timing out: one core busy on average),
# so two at a time halve the integration suites' time; each worker has a Ray temp directory of its own
# (tests/conftest.py), so their clusters never meet.
PARALLEL := -n 2 --dist loadscope
INTEGRATION_SUITES := tests/integrations examples

# The suite starts hundreds of Python processes (the CLI, rehearsals, Ray workers) that import this repository's
# code. Where PYTHONDONTWRITEBYTECODE is set (this project's machines set it) none of them writes bytecode, so each
# compiled src/ from source again (~0.3 s a process on a busy machine): compileall writes it once, before the run
# (incremental: only what changed). $(1): the interpreter.
define bytecode
	$(1) -m compileall -q src tests examples
endef

pytest: $(STAMP)
	$(call bytecode,$(BIN)/python)
	RAY_AUTH_MODE=disabled $(BIN)/python -m pytest $(PARALLEL) $(CORE_SUITES) $(INTEGRATION_SUITES)

test: lint typecheck pytest

# The fuzz and oracle campaigns and verl's launch scripts with their full budget (`make test` runs them with a quick
# one; tests/budget.py). Nothing here starts Ray. The CLI's secret hunt (marked `sweep`) has fixed inputs, so a
# bigger budget would only repeat it: `make test` runs it.
campaigns: $(STAMP)
	$(call bytecode,$(BIN)/python)
	VERL_CTX_CAMPAIGN=full RAY_AUTH_MODE=disabled $(BIN)/python -m pytest -q -m campaign $(PARALLEL)

bench: $(STAMP)
	RAY_AUTH_MODE=disabled $(BIN)/python -m benchmarks

schemas: $(STAMP)
	$(BIN)/verl-ctx schema export -s examples.custom_recipe.contexts -o schemas/examples
	$(BIN)/verl-ctx schema envelope -o schemas/envelope.schema.json

# --- compatibility matrix ------------------------------------------------------------------------------
compat: compat-verl-oldest compat-py310 compat-py312

# The tests whose answer can differ between verl releases, again on the oldest supported verl (Python of .venv):
# what composes verl's config (CLI, compose, verl's launch scripts), binds its runners, trainers and worker classes,
# launches its run_ppo, or subclasses its LLM server client (docs/compatibility.md lists what differs). Left out:
# tests/core (imports no verl); the campaigns (they fuzz our parser and codec, `make test` and `make campaigns` run
# them) but the corpus of verl's launch scripts, which runs here with its quick budget; the secret hunt (a sweep of
# our CLI's output, `make test` runs it); and the modules that test verl-ctx's own code over a surface those modules
# already cover on both releases (load, faults, store, processes, benchmarks, docs, the multi-node fixture), and, in
# the listed modules, the tests marked one_verl (more of verl-ctx's own cases over a surface a test here proves: the
# runner shapes beside the legacy and v1 rehearsals, the quick-start demo). A new module that touches a verl API the
# listed ones do not goes in this list.
VERL_SUITES := tests/integrations/test_compose.py tests/integrations/test_corpus.py tests/integrations/test_roles.py \
	tests/integrations/test_runners.py tests/integrations/test_recipe.py tests/integrations/test_recipe_entry.py \
	tests/integrations/test_delivery.py tests/integrations/test_compat.py tests/integrations/test_checkpoints.py \
	tests/integrations/test_reader.py tests/integrations/test_external_lb.py \
	tests/integrations/test_external_trainer.py tests/integrations/test_external_servers.py \
	tests/integrations/test_reward_function.py examples
$(VENV_VERL_OLDEST)/.installed: pyproject.toml $(CONSTRAINTS)
	test -x $(VENV_VERL_OLDEST)/bin/python || $(PY) -m venv $(VENV_VERL_OLDEST)
	$(VENV_VERL_OLDEST)/bin/python $(PIP_INSTALL) --upgrade pip
	$(VENV_VERL_OLDEST)/bin/python $(PIP_INSTALL) -e '.[dev]' 'verl==$(VERL_OLDEST)'
	touch $@

compat-verl-oldest: $(VENV_VERL_OLDEST)/.installed
	$(call bytecode,$(VENV_VERL_OLDEST)/bin/python)
	$(VENV_VERL_OLDEST)/bin/python -c 'import importlib.metadata as m; print("verl", m.version("verl"))'
	RAY_AUTH_MODE=disabled $(VENV_VERL_OLDEST)/bin/python -m pytest -q \
		-m '((not campaign and not sweep) or corpus) and not one_verl' \
		$(PARALLEL) tests/cli $(VERL_SUITES)

# The core and CLI suites on Python 3.10 and 3.12 (.venv has the project's default Python). $(1): 310 or 312.
define py_venv
	@py='$(PY$(1))'; want='$(subst 31,3.1,$(1))'; \
	if [ -z "$$py" ] || ! "$$py" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$$want'" 2>/dev/null; then \
		echo "make compat: no Python $$want found (looked in $(PYENV_ROOT)/versions and for python$$want on PATH)."; \
		echo "Install it (pyenv install $$want) or name it: make compat PY$(1)=/path/to/python$$want"; exit 1; \
	fi; test -x .venv-py$(1)/bin/python || (set -x; "$$py" -m venv .venv-py$(1))
	.venv-py$(1)/bin/python $(PIP_INSTALL) --upgrade pip
	.venv-py$(1)/bin/python $(PIP_INSTALL) -e '.[test]' 'ray>=2.41'
	.venv-py$(1)/bin/python $(PIP_INSTALL) --no-deps 'verl==$(VERL_NEWEST)'
	$(call no_torch,.venv-py$(1))
	touch .venv-py$(1)/.installed
endef

# The venvs without verl's dependencies must not get torch (from PyPI, a multi-GB CUDA build). $(1): the venv.
define no_torch
	@if $(1)/bin/python -m pip show -q torch 2>/dev/null; then echo "$(1) has torch installed; it must not"; exit 1; fi
endef

.venv-py310/.installed: pyproject.toml $(CONSTRAINTS)
	$(call py_venv,310)

.venv-py312/.installed: pyproject.toml $(CONSTRAINTS)
	$(call py_venv,312)

compat-py310: .venv-py310/.installed
	$(call bytecode,.venv-py310/bin/python)
	.venv-py310/bin/python -c 'import sys; print(sys.version)'
	.venv-py310/bin/python -m pytest -q -m 'not campaign and not sweep' $(PARALLEL) $(CORE_SUITES)

compat-py312: .venv-py312/.installed
	$(call bytecode,.venv-py312/bin/python)
	.venv-py312/bin/python -c 'import sys; print(sys.version)'
	.venv-py312/bin/python -m pytest -q -m 'not campaign and not sweep' $(PARALLEL) $(CORE_SUITES)

# --- the published artifacts -------------------------------------------------------------------------
# The sdist, and the wheel built from it, in dist/; twine's checks; LICENSE in both; nothing in the sdist that is
# not source: no venv, cache, build output, CI script or constraints.txt (the sdist's file list is pyproject's).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*
	$(BIN)/python -m zipfile -l dist/*.whl | grep -E '^verl_ctx-[^/ ]+\.dist-info/licenses/LICENSE '
	tar -tzf dist/*.tar.gz | grep -E '^verl_ctx-[^/ ]+/LICENSE$$'
	@junk=$$(tar -tzf dist/*.tar.gz | grep -E \
		'/(\.venv[^/]*|\.ci|\.git|dist|build|__pycache__|\.[a-z_]*cache|\.hypothesis|[^/]*\.egg-info)(/|$$)|\.py[cod]$$|/constraints\.txt$$'); \
	if [ -n "$$junk" ]; then echo "the sdist ships files that are not source:"; echo "$$junk"; exit 1; fi
	@ls -l dist

# The built wheel (not the source tree) tested once: installed non-editable with its [test] extra in a fresh
# .venv-wheel (ray and verl without its dependencies, as the compat venvs), then the CLI on the example recipe and
# the core and CLI suites, from the repository root (src/ is never on sys.path; tests/core/test_dist.py checks
# that verl_ctx is the wheel's, in site-packages). Run `make dist` first.
WHEEL_VENV := .venv-wheel
wheel-test:
	@set -- dist/*.whl; if [ $$# -ne 1 ] || [ ! -f "$$1" ]; then \
		echo "make wheel-test: want exactly one wheel in dist/ (found: $$*); run make dist first"; exit 1; fi
	rm -rf $(WHEEL_VENV)
	$(PY) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python $(PIP_INSTALL) --upgrade pip
	$(WHEEL_VENV)/bin/python $(PIP_INSTALL) "$$(ls dist/*.whl)[test]" 'ray>=2.41'
	$(WHEEL_VENV)/bin/python $(PIP_INSTALL) --no-deps 'verl==$(VERL_NEWEST)'
	$(call no_torch,$(WHEEL_VENV))
	@echo "--- smoke test of $$(ls dist/*.whl)"
	env -u PYTHONPATH $(WHEEL_VENV)/bin/python -c 'import sysconfig, verl_ctx; from pathlib import Path; \
		f = Path(verl_ctx.__file__); print(f); \
		assert f.is_relative_to(sysconfig.get_path("purelib")), "verl_ctx not imported from site-packages"'
	env -u PYTHONPATH $(WHEEL_VENV)/bin/verl-ctx --version
	env -u PYTHONPATH $(WHEEL_VENV)/bin/verl-ctx validate -s examples.custom_recipe.contexts \
		--config examples/custom_recipe/config.yaml
	env -u PYTHONPATH VERL_CTX_TEST_INSTALL=wheel $(WHEEL_VENV)/bin/python -m pytest -q -p no:cacheprovider \
		$(PARALLEL) tests/core

# Whether pip resolves verl-ctx[verl] (this checkout) with verl[vllm] and verl[sglang] of each supported verl,
# against PyPI alone (dry runs, nothing installed; slow, needs the network). Prints and saves a table.
resolve: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -m resolution tests_resolution

clean:
	rm -rf $(VENV) $(VENV_VERL_OLDEST) .venv-py310 .venv-py312 $(WHEEL_VENV) dist build \
		.mypy_cache .ruff_cache .pytest_cache
