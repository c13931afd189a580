"""An override that is or could be secret is in no message, whole or in part, whatever shape its value has."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from verl_ctx import ContextRegistry, RoleContext, validate
from verl_ctx.errors import ConfigError
from verl_ctx.integrations.verl import compose_config

SPECIALS = "/()${}[]'\"=+"
# Upper-case letters (and digits, kept as they are by the twin: a digit can change what Hydra's grammar reads, a
# letter cannot once there are six): the text around a value is lower-case English, so no coincidence.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_reg = ContextRegistry("withheld-overrides")


class _Reward(RoleContext, role="reward", registry=_reg):
    token: SecretStr | None = None
    api_key: SecretStr | None = None


def _twin(part: str) -> str:
    """``part`` with every letter replaced by the next one: the same shape, none of the same letters."""
    return "".join(LETTERS[(LETTERS.index(c) + 1) % len(LETTERS)] if c in LETTERS else c for c in part)


def _lettered(text: str) -> bool:
    return sum(c in LETTERS for c in text) >= 6


_parts = st.text(alphabet=LETTERS + "0123456789" + SPECIALS, min_size=6, max_size=24).filter(_lettered)
_base64 = st.binary(min_size=9, max_size=24).map(lambda b: base64.b64encode(b).decode().upper()).filter(_lettered)
_TEMPLATES: list[Callable[[str, str], str]] = [
    lambda a, b: a,
    lambda a, b: f"sk/{a}/{b}",
    lambda a, b: f"sk-${{{a}}}",
    lambda a, b: f"sk/${{oc.env:{a}}}/x",
    lambda a, b: f"({a})",
    lambda a, b: f"[{a}]",
    lambda a, b: f"'{a}",
    lambda a, b: f'"{a}"',
    lambda a, b: f"{a}={b}",
    lambda a, b: f"{a}+{b}",
    lambda a, b: f"{a}{b}",
]
_KEYS = ["+extra_context.reward.token=", "extra_context.reward.token=", "++extra_context.reward.api_key=", "+b.token="]


def _message(config: Path, key: str, value: str, companion: str) -> str:
    """What verl-ctx says about these overrides (Hydra's composition, then resolving and validating the contexts)."""
    args = ["--config-path", str(config), "--config-name", "tiny", key + value, f"+b.name={companion}"]
    try:
        validate(compose_config(args), registry=_reg)
    except ConfigError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - any other error's text must be as clean
        return f"{type(e).__name__}: {e}"
    return ""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.yaml").write_text("a: 1\nextra_context: {}\n")
    return folder


@settings(max_examples=25)  # each example composes a config twice (~0.1 s each)
@given(
    a=st.one_of(_parts, _base64),
    b=st.one_of(_parts, _base64),
    template=st.sampled_from(_TEMPLATES),
    key=st.sampled_from(_KEYS),
)
def test_no_part_of_a_secret_override_is_echoed_whatever_its_shape(
    tiny: Path, a: str, b: str, template: Callable[[str, str], str], key: str
) -> None:
    """A value with / ( ) ${ } [ ] ' " = + or base64, refused by Hydra's grammar, its composition or an
    interpolation, and another override holding a piece of it: what is said does not depend on the value's
    letters and digits (a twin of the same shape gets the same message), and the value is not in it."""
    value, twin = template(a, b), template(_twin(a), _twin(b))
    said = _message(tiny, key, value, a[:4])
    assert said == _message(tiny, key, twin, _twin(a)[:4])
    assert value not in said
    assert base64.b64encode(value.encode()).decode() not in said


@pytest.mark.parametrize(
    "value",
    [
        "Zm9vYmFyYmF6cXV4cXV1eFlJeHlZ=",  # Hydra's lexer showed all but the last character
        "sk(LIVESECRET)",  # a function call to Hydra's grammar
        "sk-${LIVESECRET}",  # OmegaConf names the interpolation key it cannot find
        "sk/${oc.env:LIVESECRET}/x",
        "[LIVESECRET",
        "'LIVESECRET",
    ],
)
def test_the_reported_shapes_are_refused_by_position_and_key(tiny: Path, value: str) -> None:
    """The shapes that leaked are refused by the override's position and key; no piece of the value is said."""
    said = _message(tiny, "+extra_context.reward.token=", value, "LIVE")
    assert "extra_context.reward.token" in said
    assert "LIVESECRET" not in said
    assert "SECRET" not in said
    assert "Zm9vYmFy" not in said
