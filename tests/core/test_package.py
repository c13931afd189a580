"""The package's surface: light imports, an exact public API, a typed marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import verl_ctx


def test_import_is_light() -> None:
    """`import verl_ctx` pulls in neither ray, torch, verl, hydra nor omegaconf."""
    code = (
        "import sys, verl_ctx;"
        "heavy = [m for m in ('ray', 'torch', 'verl', 'hydra', 'omegaconf', 'typer') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_api_is_exactly_all() -> None:
    """Every public name is in __all__, sorted, and nothing private leaks into it."""
    import types

    # Subpackages (cli, demo, integrations) become attributes once imported; they are not the API surface.
    public = {
        n for n in dir(verl_ctx) if not n.startswith("_") and not isinstance(getattr(verl_ctx, n), types.ModuleType)
    }
    assert set(verl_ctx.__all__) == public
    assert all(not n.startswith("_") for n in verl_ctx.__all__)


def test_package_is_typed() -> None:
    """py.typed ships so users' type checkers see our annotations."""
    assert (Path(verl_ctx.__file__).parent / "py.typed").is_file()


def test_integration_without_verl_names_the_pip_extra(tmp_path: Path) -> None:
    """Importing the verl integration where verl is missing raises ImportError with the install command."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['verl'] = None\n")
    code = "try:\n    import verl_ctx.integrations.verl\nexcept ImportError as e:\n    print('IMPORT-ERROR', e)\n"
    import os

    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert "IMPORT-ERROR" in out.stdout
    assert "pip install 'verl-ctx[verl]'" in out.stdout
