"""The wire format: envelopes, store references, their text form, and where readers look for them.

Most code never needs this module: ``verl_ctx.encode`` / ``attach`` make envelopes and ``verl_ctx.decode``
finds and reads them. Use it to put an envelope where only text may go, to check one, or to teach
``decode`` another place to look (``register_source``).
"""

from ._wire.envelope import (
    DEFAULT_MAX_BYTES,
    ENVELOPE_FORMAT,
    RESERVED_KEY,
    EnvelopeV1,
    StoreRefV1,
    check_envelope,
    envelope_json_schema,
    from_text,
    to_text,
)
from ._wire.sources import Source, register_source, sources

__all__ = [
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
]
