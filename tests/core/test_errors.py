"""Every error and warning pickles with its attributes (they cross Ray), and the tree is what errors.py draws."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import verl_ctx.errors as errors
from verl_ctx.errors import (
    ContextChangedError,
    ContextError,
    ContextValidationError,
    ContextWarning,
    EnvelopeError,
    FieldError,
    LaunchError,
    MissingContextError,
    SchemaMismatchError,
)

FIELD = FieldError(role="critic", path="rows[0].weight", message="input should be a number", input='"x"', hint="h")

INSTANCES: list[BaseException] = [
    ContextValidationError([FIELD], omitted=3),
    EnvelopeError("corrupt", errors=[FIELD]),
    SchemaMismatchError(
        "skew",
        role="critic",
        driver_fingerprint="a" * 64,
        worker_fingerprint="b" * 64,
        driver_version=1,
        worker_version=2,
        differing_fields=["x"],
    ),
    MissingContextError("none here", role="ref"),
    LaunchError("refused", cause="AssertionError: boom", key="actor_rollout_ref.actor"),
    ContextChangedError("changed", changes=["critic.value_clip: 0.2 -> 0.3"]),
    *(
        cls("warned", role="critic", path="extra_context.critic")
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, ContextWarning) and cls is not ContextWarning
    ),
    *(
        cls("plain message")
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, (ContextError, ContextWarning))
        and not any(
            "__init__" in vars(k)
            for k in cls.__mro__
            if k not in (ContextError, ContextWarning)
            and k.__module__ == errors.__name__
            and issubclass(k, (ContextError, ContextWarning))
        )
    ),
]


@pytest.mark.parametrize("exc", INSTANCES, ids=lambda e: type(e).__name__)
def test_pickles_with_every_attribute(exc: BaseException) -> None:
    """pickle.loads(pickle.dumps(e)) gives the same class, message and attributes."""
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert vars(back) == vars(exc)


def test_every_public_error_and_warning_is_covered() -> None:
    """Each class in verl_ctx.errors is exercised above, so a new one cannot skip the pickling test."""
    public = {getattr(errors, n) for n in errors.__all__} - {FieldError}
    assert public <= {type(e) for e in INSTANCES} | {ContextError, ContextWarning}


def test_tree_in_the_docstring_matches_the_classes() -> None:
    """The drawing at the top of errors.py names every class under its real parent."""
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls: Any = getattr(errors, name)
        if name in ("FieldError", "ContextError", "ContextWarning"):
            continue
        assert name in doc, f"{name} missing from the tree"
        assert issubclass(cls, (ContextError, ContextWarning))
