"""Secrets in a saved envelope: each sealed (an scrypt digest under the run's salt) before any other encoding step
sees it, so no checkpoint file holds a secret in a form it can be read back from."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import msgspec

from ...._model.field_errors import plain
from ...._model.role_context import RoleContext
from ...._secrets.plan import SecretBase, holds_secret
from ...._secrets.redact import MASK
from ...._wire.envelope import encode
from ...._wire.msgpack import enc_hook, prepare_all

SCRYPT = {"n": 2**14, "r": 8, "p": 1}

SEALED_PREFIX = "verl-ctx-sealed:"


@functools.lru_cache(maxsize=256)
def _seal(secret: bytes, salt: bytes) -> str:
    if secret.startswith(SEALED_PREFIX.encode()):
        return secret.decode()  # a checkpoint's value, migrated: sealed already
    return SEALED_PREFIX + hashlib.scrypt(secret, salt=salt, dklen=32, maxmem=64 * 2**20, **SCRYPT).hex()


def sealed_payload(ctx: RoleContext, salt: bytes) -> bytes:
    """The payload ``encode`` makes, with each secret value replaced by its digest."""

    def sealed(secret: SecretBase[Any]) -> Any:
        value = secret.get_secret_value()
        if isinstance(value, bytes):
            return _seal(value, salt).encode()
        # A str as itself; Secret[int | float | bool] by its text (the kinds _secrets.plan lets travel).
        return _seal((value if isinstance(value, str) else repr(value)).encode(), salt)

    def hook(obj: Any) -> Any:
        # SecretStr, SecretBytes, pydantic.Secret[T]: one base
        return sealed(obj) if isinstance(obj, SecretBase) else enc_hook(obj)

    encoder = msgspec.msgpack.Encoder(enc_hook=hook)
    try:
        return encoder.encode(ctx)
    except OverflowError:  # an int msgpack cannot hold, as in codec.encode_payload; secrets sealed on that path too
        return encoder.encode(prepare_all(ctx, on_secret=sealed))


def sealed_envelope(ctx: RoleContext, role: str, salt: bytes) -> dict[str, Any]:
    env = dict(encode(ctx, role=role))
    if holds_secret(ctx):
        env["payload"] = sealed_payload(ctx, salt)
    return env


def is_sealed(value: Any) -> bool:
    if isinstance(value, bytes):
        return value.startswith(SEALED_PREFIX.encode())
    return isinstance(value, str) and value.startswith(SEALED_PREFIX)


def shown(value: Any, depth: int = 0) -> Any:
    """Saved (sealed) data as ``plain`` shows a context: JSON-native, secrets as stars."""
    if is_sealed(value):
        return MASK
    if depth > 20:
        return "..."  # as plain() cuts a value nested deeper
    if isinstance(value, dict):
        return {str(k): shown(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v, depth + 1) for v in value]
    return plain(value, depth)
