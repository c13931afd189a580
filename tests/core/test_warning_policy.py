"""The suite's warning policy (pyproject's ``filterwarnings``): third-party deprecations are theirs to fix and are
ignored, but a deprecation triggered by this project's own code is an error, as every other warning is."""

from __future__ import annotations

import warnings
from typing import Any

import pytest


def _warn_from(module: str, category: type[Warning]) -> None:
    """Raise ``category`` attributed to a function of ``module`` (the frame Python's filters match by name)."""
    namespace: dict[str, Any] = {"__name__": module, "warnings": warnings, "category": category}
    exec("def deprecated():\n    warnings.warn('an old API', category, stacklevel=1)\n", namespace)
    namespace["deprecated"]()


@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning])
@pytest.mark.parametrize(
    "module", ["verl_ctx._wire.codec", "verl_ctx", "tests.core.test_codec", "examples.custom_recipe"]
)
def test_a_deprecation_our_code_triggers_is_an_error(module: str, category: type[Warning]) -> None:
    with pytest.raises(category, match="an old API"):
        _warn_from(module, category)


@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning])
@pytest.mark.parametrize("module", ["ray._private.worker", "verl.trainer.main_ppo", "verl_ctx_fork", "hydra"])
def test_a_deprecation_inside_a_third_party_library_is_ignored(module: str, category: type[Warning]) -> None:
    _warn_from(module, category)  # no error: the ignore for third-party deprecations applies
