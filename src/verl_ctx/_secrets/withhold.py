"""Command-line overrides in other libraries' messages: withheld by what was given, not by what is recognised.

Hydra, OmegaConf, argparse and click echo an override they refuse, whole or in part: Hydra's lexer shows the
input up to where it stopped (``[Zm9vYmFy…``), its function-call grammar names ``sk(…)`` a function, OmegaConf
names the key of a ``${…}`` it could not resolve. Any value may be a secret meant for a context, so:

* an override Hydra's grammar cannot read is refused here, before Hydra sees it, by its position and key alone
  (``integrations.verl._compose.check_overrides``); its value, whole or in part, is in no message;
* in any other message of those libraries every override's value is masked whole, and for an override whose
  key is or could be secret (under ``extra_context``, or named like a credential) every run of
  ``FRAGMENT`` or more characters that also occurs in its value is masked too (``without_assigned_values``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "FRAGMENT",
    "WITHHELD",
    "could_be_secret",
    "looks_secret",
    "named",
    "override_key",
    "without_assigned_values",
]

WITHHELD = "<value withheld>"
#: The shortest run of a secret's characters that is masked wherever it appears (shorter runs are common text).
FRAGMENT = 4

# An override's key as Hydra's grammar writes it: an optional +, ++ or ~, then a dotted key, a config group
# (``group/option``), a package (``@pkg``) or a list index; the value follows the first '='.
_KEY = re.compile(r"^(?:~|\+\+|\+)?([A-Za-z_$][\w\-$]*(?:[./@:][\w\-$]+|\[\d+\])*)(?:=|$)")
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|cred|cookie|session|sign|private|cert|bearer", re.I)


def looks_secret(name: str) -> bool:
    """Whether a key reads like a secret's (``api_key``, ``token``, ``password``, ...)."""
    return bool(_SECRET_NAME.search(name))


def override_key(override: str) -> str | None:
    """The key of ``override`` (``+extra_context.reward.token=...`` -> ``extra_context.reward.token``), if readable."""
    found = _KEY.match(override)
    return found.group(1) if found else None


def could_be_secret(override: str) -> bool:
    """Whether the value of ``override`` may be a secret: its key is under ``extra_context`` (a context's schema
    decides later), is named like a credential, or cannot be read at all."""
    key = override_key(override)
    if key is None:
        return True
    return key.split(".", 1)[0] == "extra_context" or bool(_SECRET_NAME.search(key))


def named(position: int, override: str) -> str:
    """How a message refers to an override: its position among the overrides, and its key when it has one."""
    key = override_key(override)
    return f"override #{position} ({key})" if key else f"override #{position} (its key could not be read either)"


def without_assigned_values(text: str, assignments: Iterable[str]) -> str:
    """``text`` with the value of every ``key=value`` in ``assignments`` masked as ``<value withheld>``.

    Every value is masked wherever it appears whole (a short one only as a token of its own, not inside a longer
    name); the value of an override that could be secret is also masked in part, every run of ``FRAGMENT`` or more
    of its characters. The key stays: it is what a user needs to fix the override.
    """
    given = [a for a in assignments if "=" in a]
    for assignment in given:
        value = assignment.partition("=")[2]
        if len(value) >= FRAGMENT:
            text = text.replace(value, WITHHELD)
        elif value:
            text = re.sub(rf"(?<![\w.\-]){re.escape(value)}(?![\w\-])(?!\.\w)", WITHHELD, text)
    for assignment in given:
        value = assignment.partition("=")[2]
        if len(value) >= FRAGMENT and could_be_secret(assignment):
            text = _without_fragments(text, value)
    return text


def _without_fragments(text: str, value: str) -> str:
    """``text`` with every ``FRAGMENT``-character window that also occurs in ``value`` masked (runs of such windows
    as one mask). Linear in both lengths: a set of the value's windows, one pass over the text."""
    windows = {value[i : i + FRAGMENT] for i in range(len(value) - FRAGMENT + 1)}
    hidden = [False] * len(text)
    for i in range(len(text) - FRAGMENT + 1):
        if text[i : i + FRAGMENT] in windows:
            hidden[i : i + FRAGMENT] = [True] * FRAGMENT
    out: list[str] = []
    for i, char in enumerate(text):
        if not hidden[i]:
            out.append(char)
        elif i == 0 or not hidden[i - 1]:
            out.append(WITHHELD)
    return "".join(out)
