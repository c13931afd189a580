# The two quick-start commands: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench schemas clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	RAY_AUTH_MODE=disabled $(BIN)/verl-ctx demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	RAY_AUTH_MODE=disabled $(BIN)/python -m pytest

test: lint typecheck pytest

bench: $(STAMP)
	RAY_AUTH_MODE=disabled $(BIN)/python -m benchmarks

schemas: $(STAMP)
	$(BIN)/verl-ctx schema export -s examples.custom_recipe.contexts -o schemas/examples
	$(BIN)/verl-ctx schema envelope -o schemas/envelope.schema.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
