"""Hunt for secrets in what a command printed or wrote, in every encoding a leak could take (issue #23).

``encodings_of(secret)`` lists the byte strings that betray ``secret``: the plain UTF-8 bytes; base64 (standard and
URL-safe, padded and unpadded, and, for a secret inside a larger base64 blob, the characters that depend on the
secret's bytes alone at each of the three alignments), of the plain bytes and of the JSON-escaped forms (a JSON
document holding the secret, then base64-encoded, holds it escaped); hex (lower and upper case); MessagePack (as
``str`` and as ``bytes``); JSON-escaped (``ensure_ascii`` both ways); and Python's ``repr`` (a ``str``, a ``bytes``).

``hunt(blob, secrets, where)`` returns one line per encoding of a secret found in ``blob``, naming the secret (by
its label, never its value), the encoding and ``where``; an empty list means nothing was found.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

__all__ = ["encodings_of", "everything_about", "hunt", "hunt_files", "labelled_encodings"]

# The shortest run of base64 characters worth hunting: shorter runs match ordinary base64 text by chance.
_MIN_B64_RUN = 8


def _aligned_middle(secret: bytes, offset: int, urlsafe: bool) -> bytes:
    """The base64 characters that depend only on ``secret``'s bytes when they start ``offset`` bytes into a blob.

    Each base64 character carries 6 bits of the blob; the characters whose 6 bits all lie inside the secret are the
    same whatever bytes surround it, so they appear in the encoding of any blob holding the secret at an offset
    congruent to ``offset`` (mod 3).
    """
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = encode(b"\x00" * offset + secret).rstrip(b"=")
    start_bit, end_bit = 8 * offset, 8 * (offset + len(secret))
    first = -(-start_bit // 6)  # the first character starting at or after the secret's first bit
    last = end_bit // 6  # one past the last character ending at or before its last bit
    return text[first:last]


@functools.lru_cache(maxsize=4096)
def labelled_encodings(secret: str | bytes) -> tuple[tuple[str, bytes], ...]:
    """``(encoding name, bytes)`` for each encoding of ``secret`` (duplicates removed, the first name kept)."""
    raw = secret.encode() if isinstance(secret, str) else bytes(secret)
    try:
        text: str | None = secret if isinstance(secret, str) else raw.decode()
    except UnicodeDecodeError:
        text = None
    # The forms a secret takes inside a text document; a base64 blob may hold any of them (JSON, then base64).
    textual: list[tuple[str, bytes]] = [("plain", raw)]
    if text is not None:
        for ascii_only in (True, False):
            # The inside of the JSON string: a secret inside a longer string has no quotes of its own.
            escaped = json.dumps(text, ensure_ascii=ascii_only)[1:-1].encode()
            textual.append((f"JSON-escaped (ensure_ascii={ascii_only})", escaped))
    found: list[tuple[str, bytes]] = list(textual)
    for form, value in textual:
        of = "" if form == "plain" else f" of {form}"
        for urlsafe, kind in ((False, "base64"), (True, "base64url")):
            encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
            whole = encode(value)
            found.append((f"{kind} (padded){of}", whole))
            found.append((f"{kind} (unpadded){of}", whole.rstrip(b"=")))
            for offset in range(3):
                middle = _aligned_middle(value, offset, urlsafe)
                if len(middle) >= _MIN_B64_RUN:
                    found.append((f"{kind} (inside a blob, offset {offset}){of}", middle))
    found.append(("hex", binascii.hexlify(raw)))
    found.append(("HEX", binascii.hexlify(raw).upper()))
    found.append(("msgpack bytes", msgspec.msgpack.encode(raw)))
    if text is not None:
        found.append(("msgpack str", msgspec.msgpack.encode(text)))
        found.append(("repr (str)", repr(text)[1:-1].encode()))
    found.append(("repr (bytes)", repr(raw)[2:-1].encode()))
    seen: set[bytes] = set()
    unique = []
    for name, value in found:
        if value and value not in seen:
            seen.add(value)
            unique.append((name, value))
    return tuple(unique)


def encodings_of(secret: str | bytes) -> list[bytes]:
    """Every byte string that betrays ``secret`` (see the module's docstring), without duplicates."""
    return [value for _name, value in labelled_encodings(secret)]


def _labelled(secrets: Mapping[str, str | bytes] | Iterable[str | bytes]) -> list[tuple[str, str | bytes]]:
    if isinstance(secrets, Mapping):
        return list(secrets.items())
    return [(f"secret #{i}", s) for i, s in enumerate(secrets)]


def hunt(
    blob: bytes | str, secrets: Mapping[str, str | bytes] | Iterable[str | bytes], where: str = "blob"
) -> list[str]:
    """One line per encoding of a secret found in ``blob``: ``"<where>: <label> as <encoding>"``.

    ``secrets`` maps a label to each secret (a plain iterable is labelled ``secret #i``); the lines name the label,
    never the value, so a failing assertion does not print the secret either.
    """
    data = blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else blob
    lines = []
    for label, secret in _labelled(secrets):
        for name, value in labelled_encodings(secret):
            if value in data:
                lines.append(f"{where}: {label} as {name}")
    return lines


def hunt_files(
    root: Path, secrets: Mapping[str, str | bytes] | Iterable[str | bytes], *, skip: Iterable[Path] = ()
) -> list[str]:
    """``hunt`` over every regular file under ``root`` (or ``root`` itself, a file), except the paths in ``skip``."""
    skipped = {p.resolve() for p in skip}
    labelled = _labelled(secrets)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    lines = []
    for path in files:
        if path.resolve() not in skipped:
            lines += hunt(path.read_bytes(), dict(labelled), str(path))
    return lines


def everything_about(exc: BaseException) -> str:
    """All text an exception carries: its message, attributes, traceback, chained and suppressed exceptions, and the
    arguments it pickles with (what a driver catching a worker's error would see)."""
    import pickle
    import traceback

    parts = ["".join(traceback.format_exception(exc)), repr(vars(exc)), repr(pickle.loads(pickle.dumps(exc)).args)]
    seen: BaseException | None = exc
    while seen is not None:
        parts.append(repr(seen))
        seen = seen.__context__ or seen.__cause__
    return "\n".join(parts)
