"""The package's surface: light imports, each public ``__all__`` pinned, a typed marker, one version source."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
from importlib.metadata import version
from pathlib import Path

import pytest

import verl_ctx

# Growth of the public API is a reviewed decision: adding a name means changing this table.
PUBLIC = {
    "verl_ctx": [
        "ContextError",
        "ContextRegistry",
        "ContextSet",
        "Provenance",
        "RoleContext",
        "attach",
        "decode",
        "default_registry",
        "encode",
        "migration",
        "validate",
    ],
    "verl_ctx.errors": [
        "ConfigError",
        "ContextChangedError",
        "ContextError",
        "ContextValidationError",
        "ContextWarning",
        "EnvelopeError",
        "FieldError",
        "InactiveRoleWarning",
        "LaunchError",
        "LiteralSecretWarning",
        "MissingContextError",
        "PayloadWarning",
        "SchemaDefinitionError",
        "SchemaMismatchError",
        "SchemaSkewWarning",
        "ServerUnavailableError",
        "StaleOutputError",
    ],
    "verl_ctx.envelope": [
        "DEFAULT_MAX_BYTES",
        "ENVELOPE_FORMAT",
        "EnvelopeV1",
        "RESERVED_KEY",
        "Source",
        "StoreRefV1",
        "check_envelope",
        "envelope_json_schema",
        "from_text",
        "register_source",
        "sources",
        "to_text",
    ],
    "verl_ctx.schema": ["Change", "KNOWN_ROLES", "RULES", "Rule", "SchemaInfo", "diff_schemas", "schema_info"],
    "verl_ctx.testing": [
        "bound_worker",
        "contexts",
        "hydra_config",
        "reward_kwargs",
        "save_checkpoint",
        "tiny_dataset",
        "tiny_model",
        "tiny_run_args",
        "worker_config",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_all_is_pinned_sorted_and_complete(module: str) -> None:
    """Each public module's __all__ is exactly the pinned list, in sorted order, and names only what it defines."""
    mod = importlib.import_module(module)
    assert mod.__all__ == PUBLIC[module]
    assert mod.__all__ == sorted(mod.__all__)
    public = {n for n, obj in vars(mod).items() if not n.startswith("_") and _ours(obj)}
    assert public == set(mod.__all__)


def _ours(obj: object) -> bool:
    """Defined by verl-ctx (a class, function or instance of ours), or a plain constant; not an import."""
    if isinstance(obj, types.ModuleType) or type(obj).__module__ == "__future__":
        return False
    module = getattr(obj, "__module__", None)
    return module is None or module.startswith("verl_ctx")


def test_top_level_is_small() -> None:
    """A recipe author meets at most 15 names at the top: declare, validate, carry, decode."""
    assert len(verl_ctx.__all__) <= 15
    assert {"RoleContext", "validate", "decode"} <= set(verl_ctx.__all__)


def test_version_comes_from_the_installed_metadata() -> None:
    """__version__ is read from the package metadata, so pyproject.toml is its one source."""
    assert verl_ctx.__version__ == version("verl-ctx")


def test_import_is_light() -> None:
    """`import verl_ctx` (and its public namespaces) pull in neither ray, torch, verl, hydra, omegaconf nor click."""
    code = (
        "import sys, verl_ctx, verl_ctx.errors, verl_ctx.envelope, verl_ctx.schema, verl_ctx.testing;"
        "heavy = [m for m in ('ray', 'torch', 'verl', 'hydra', 'omegaconf', 'click') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_import_loads_nothing_a_pydantic_model_does_not() -> None:
    """Beyond what importing msgspec and defining one pydantic model loads, `import verl_ctx` loads only its own
    modules (and `gc`, built in): the import-time target of #15 is held by what is imported, not by a timer."""
    code = (
        "import sys\nimport msgspec\nfrom pydantic import BaseModel\n"
        "class M(BaseModel):\n    x: int = 0\n"
        "before = set(sys.modules)\nimport verl_ctx\n"
        "print(','.join(sorted(m for m in set(sys.modules) - before if m.split('.')[0] not in ('verl_ctx', 'gc'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_package_is_typed() -> None:
    """py.typed ships so users' type checkers see our annotations."""
    assert (Path(verl_ctx.__file__).parent / "py.typed").is_file()


def _without(tmp_path: Path, module: str, code: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )


def test_integration_without_verl_names_the_pip_extra(tmp_path: Path) -> None:
    """Importing the verl integration where verl is missing raises ImportError with the install command."""
    code = "try:\n    import verl_ctx.integrations.verl\nexcept ImportError as e:\n    print('IMPORT-ERROR', e)\n"
    out = _without(tmp_path, "verl", code)
    assert "IMPORT-ERROR" in out.stdout
    assert "pip install 'verl-ctx[verl]'" in out.stdout


def test_console_script_without_click_names_the_pip_extra(tmp_path: Path) -> None:
    """The verl-ctx command without its [cli] extra says what to install instead of raising ModuleNotFoundError."""
    out = _without(tmp_path, "click", "from verl_ctx.cli import main; main(['--help'])")
    assert out.returncode == 2
    assert "pip install 'verl-ctx[cli]'" in out.stderr
    assert "Traceback" not in out.stderr
