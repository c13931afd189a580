"""A context's payload: ``encode_payload`` (the compiled encoder where the schema has one, else msgspec with the
format's hooks) and ``decode_payload`` (plain data, its cost bounded before it is parsed). The format itself is
``msgpack``; the compiled path ``compiled``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .budget import check_decode_cost
from .compiled import encoder_for, encoders
from .msgpack import decoder, encoder, prepare_all

__all__ = ["decode_payload", "encode_payload"]


def encode_payload(instance: BaseModel) -> bytes:
    """MessagePack bytes of ``instance``'s field values; raises ``UnencodableError``."""
    cls = type(instance)
    compiled = encoders[cls] if cls in encoders else encoder_for(cls)
    if compiled is not None:
        # A generated pre-pass hands msgspec the dicts the hook would return, without a hook call per model.
        return compiled(instance)
    try:
        return encoder.encode(instance)
    except OverflowError:
        return encoder.encode(prepare_all(instance))


def decode_payload(payload: bytes) -> Any:
    """Plain Python data from payload bytes; raises msgspec, ValueError, or RecursionError on bad bytes.

    A payload whose items (a slot each, and an object for each map or array) would cost more than 4x its size +
    50 MB is refused before it is parsed, whatever the schema (``budget.PayloadCostError``, a ValueError).
    """
    check_decode_cost(payload)
    return decoder.decode(payload)
