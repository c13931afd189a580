"""The one redaction every output of a process goes through: the secret values it has seen, in any encoding.

Each output path also shows secrets as stars on its own (``plain``, withheld inputs, sealed checkpoints), but a
path that forgets, or a value made from a secret (an ``Authorization`` header, a URL with the key in it, a user's
``print``), would show it. So the values themselves are learnt where they come in, and every text verl-ctx writes
passes through ``redact`` by construction, not by each path remembering:

* learnt: ``validate`` (the driver) and ``decode`` (each worker) learn the secrets of the contexts they build, at
  the paths the schema's secret plan names (``learn_context``); the CLI learns whatever it was given (``learn``);
* redacted: every ``ContextError`` and ``ContextWarning`` message, when made and when shown (``verl_ctx.errors``);
  verl-ctx's loggers (``logger``) and its own lines in a trainer's log (``say``); the CLI's standard output and
  error streams and the files it writes (``RedactingStream``).

A secret is looked for as itself and as the encodings an output could carry it in: JSON-escaped, base64 (standard
and URL-safe, at each of the three alignments a value can start at inside a longer base64 text), and hex. Values
shorter than ``MIN_LENGTH`` are not learnt: masking every ``"1"`` in the output would say where a one-character
secret is without hiding anything.
"""

from __future__ import annotations

import base64
import io
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import BaseModel

from .plan import SecretBase, secrets_at, secrets_in

#: What every output shows in place of a secret value.
MASK = "**********"

if TYPE_CHECKING:
    import logging

__all__ = [
    "MIN_LENGTH",
    "RedactingStream",
    "forget_all",
    "learn",
    "learn_context",
    "logger",
    "redact",
    "redact_record",
    "say",
    "secret_values",
]

MIN_LENGTH = 4

# Every form of every secret learnt in this process, longest first (a form inside a longer one is masked after it).
# Replaced whole under the lock, never changed in place: ``redact`` reads one consistent tuple without locking.
_forms: tuple[str, ...] = ()
_known: set[str] = set()
_lock = threading.Lock()


def secret_values(value: Any) -> Iterable[str]:
    """The values of every secret in ``value`` (models, dataclasses, mappings, sequences), as text."""
    return (_text(secret) for secret in secrets_in(value))


def _text(secret: SecretBase[Any]) -> str:
    inner = secret.get_secret_value()
    return inner.decode("utf-8", "replace") if isinstance(inner, bytes) else str(inner)


def learn(value: Any) -> None:
    """Remember the secrets in ``value`` (a context, a ``ContextSet``, any container): ``redact`` masks them."""
    if isinstance(value, Mapping) and not isinstance(value, BaseModel):
        value = dict(value)
    _learn(secret_values(value))


def learn_context(context: BaseModel) -> None:
    """Remember the secrets of a decoded ``context``, read at the paths its schema can hold one (a decoded
    value holds secrets nowhere else): what decode calls, so a worker's messages mask what it was given."""
    _learn(_text(secret) for secret in secrets_at(context, type(context)))


def _learn(secrets: Iterable[str]) -> None:
    global _forms
    new = [s for s in secrets if len(s) >= MIN_LENGTH and s not in _known]
    if not new:
        return
    with _lock:
        forms = set(_forms)
        for secret in new:
            _known.add(secret)
            forms.update(f for f in _encodings(secret) if len(f) >= MIN_LENGTH)
        _forms = tuple(sorted(forms, key=len, reverse=True))


def forget_all() -> None:
    """Forget every secret learnt (a test's isolation; a process that is done with its contexts)."""
    global _forms
    with _lock:
        _forms = ()
        _known.clear()


def redact(text: str) -> str:
    """``text`` with every learnt secret, in every form ``_encodings`` names, replaced by stars."""
    for form in _forms:
        if form in text:
            text = text.replace(form, MASK)
    return text


def say(text: str) -> None:
    """Print one line of verl-ctx's own to standard output, redacted (a resume's notes in a trainer's log)."""
    print(redact(text), flush=True)


def redact_record(record: logging.LogRecord) -> bool:
    """A logging filter: the record's message (its arguments merged in) redacted before any handler formats it."""
    if _forms:
        record.msg, record.args = redact(record.getMessage()), None
    return True


def logger(name: str) -> logging.Logger:
    """verl-ctx's logger ``name``, whose records are redacted (every module logs through one of these)."""
    import logging  # on use: `import verl_ctx` loads nothing a pydantic model does not (#15)

    found = logging.getLogger(name)
    if redact_record not in found.filters:
        found.addFilter(redact_record)
    return found


def _encodings(secret: str) -> list[str]:
    import json  # on first use: `import verl_ctx` stays light (#15)

    raw = secret.encode()
    forms = [secret, json.dumps(secret)[1:-1], raw.hex(), raw.hex().upper()]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.append(encode(raw).decode())  # the secret encoded alone, padding and all
        for pad in range(3):  # inside a longer base64 text, the secret's bytes start at one of three alignments
            data = b"\0" * pad + raw
            whole = encode(data[: len(data) // 3 * 3]).decode()  # groups of three bytes: each four characters
            part = whole[4:] if pad else whole  # the first group mixes in the bytes before the secret
            if len(part) >= 8:
                forms.append(part)
    return list(dict.fromkeys(forms))


class RedactingStream(io.TextIOBase):
    """A text stream that writes everything through ``redact`` to the stream it wraps.

    Line-buffered: a secret split across two ``write`` calls is masked as long as it sits on one line, which is how
    every output of the CLI is written (``click.echo`` writes a whole message and its newline).
    """

    def __init__(self, wrapped: TextIO) -> None:
        self._wrapped = wrapped
        self._pending = ""

    def write(self, text: str | bytes) -> int:
        if isinstance(text, bytes):  # click.echo(bytes) writes to a stream without a binary buffer as to this one
            text = text.decode(self.encoding, "replace")
        if not _forms:
            self._flush_pending()
            return self._wrapped.write(text)
        self._pending += text
        if "\n" in self._pending:
            done, _, self._pending = self._pending.rpartition("\n")
            self._wrapped.write(redact(done + "\n"))
        return len(text)

    def _flush_pending(self) -> None:
        if self._pending:
            self._wrapped.write(redact(self._pending))
            self._pending = ""

    def flush(self) -> None:
        self._flush_pending()
        self._wrapped.flush()

    def isatty(self) -> bool:
        return self._wrapped.isatty()

    def fileno(self) -> int:
        return self._wrapped.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._wrapped, "encoding", "utf-8")

    def writable(self) -> bool:
        return True
