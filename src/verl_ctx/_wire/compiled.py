"""The compiled path: msgspec checks a payload in C, and pydantic instances are built without re-validation.

For a schema whose every part is on the closed list below, a mirror of it is generated once per class, lazily (on
its first encode or decode): a ``msgspec.Struct`` per model, every field required and no other allowed, constraints
as ``msgspec.Meta``. The typed decoder then checks in C what pydantic-core would, and generated code builds the
instances without validating again: one instance by pydantic-core's own model builder (a ``model`` schema whose
inner schema is ``any``, given the ``(__dict__, extra, fields set)`` its fields validator would have returned); a
list of flat models by the same builder inside a ``list`` schema, one call per 4,096 rows, its triples made by ``map``
and ``zip`` over C callables (no bytecode per row: 17 % faster per row than setting BaseModel's slot descriptors
through ``map``, which remains where pydantic-core cannot be given a prebuilt-free schema).

Why the answers are pydantic's own:

* on the closed list, the mirror accepts a subset of what pydantic accepts, and where both accept they build the
  same value, with ``__dict__`` in field order (``msgspec.structs.asdict``). ``tests/core/test_compiled.py``
  checks this by property test (generated schemas; their payloads, valid and mutated). The encoder writes every
  field and nothing else, so requiring exactly the fields costs nothing, and ``model_fields_set`` is every field.
  The models of one list (or one dict's values) built in bulk share one such set, a fresh one per container:
  pydantic only ever adds a field to a fields set (on assignment) or copies it (``model_copy``, ``copy``,
  ``deepcopy``), which leaves a set of every field as it is, and a million rows do not carry 216 bytes each of the
  same set. Code that edits ``model_fields_set`` in place by hand would see them share it, and a pickle of them
  holds the set once (shorter bytes; unpickled, they share it again);
* whatever the mirror refuses (a missing or unknown field, an ``Ext`` value such as an int past 2**64 in an
  ``int`` field, NaN against a bound, a ``bool`` for an ``int``) goes to the pydantic path, so acceptance and the
  error list are pydantic's;
* datetimes, dates, times, timedeltas and decimals are decoded as plain values and given, one by one, to
  pydantic-core's validator of that field's own core-schema node (a ``datetime`` object, which pydantic would
  return unchanged, skips it): msgspec's parsers never read text pydantic would read differently.

What does not qualify keeps the pydantic path: validators, serializers, private attributes, ``model_post_init``,
a custom ``__init__``/``__new__``, custom core schemas, generics, ``RootModel``, ``extra="allow"``, aliases, unions
other than ``X | None``, ``Any``, secrets, paths, URLs, recursive models, string patterns or transformations,
``allow_inf_nan=False``, float ``multiple_of``, length limits on dicts, sets and tuples. A ``RoleContext``
opts out with the class keyword ``compiled=False``; ``why_not(cls)`` says why a class takes the pydantic path.

Encoding takes a generated pre-pass that hands msgspec each model's ``__dict__`` wherever today's ``enc_hook``
would return that same dict (an instance of exactly the expected class, its ``__dict__`` only its fields, its
datetimes naive or UTC); any other value is left to the hook, so the bytes are the hook's, byte for byte.
"""

from __future__ import annotations

import threading

from pydantic import BaseModel

from .._model.role_context import ON_REBUILD
from .compiler import Compiler, Decoder, Encoder, NotCompiled, Refused

__all__ = ["Refused", "decoder_for", "decoders", "encoder_for", "encoders", "forget", "why_not"]


# --- one compile per class, lazily ------------------------------------------------------------------------

# class -> its compiled decoder / payload encoder (None: the pydantic path / the encoder's hook). Looked up by
# class, because reading a class attribute goes through pydantic's metaclass and costs more than this whole lookup.
# A class is compiled
# from its core schema once it is complete; RoleContext.model_rebuild() calls forget() (ON_REBUILD), so a rebuilt
# schema is compiled again and a decode always answers as the validator pydantic would use. Unbounded like the classes
# themselves (one entry per schema class encoded or decoded, as in _model.fingerprint).
decoders: dict[type, Decoder | None] = {}
encoders: dict[type, Encoder | None] = {}
_why_not: dict[type, str | None] = {}
_lock = threading.Lock()


def decoder_for(cls: type[BaseModel]) -> Decoder | None:
    """``payload -> instance`` for ``cls`` (raising ``Refused`` where pydantic must decide); None if not compiled."""
    if cls in decoders:
        return decoders[cls]
    return _compile(cls)[0]


def encoder_for(cls: type[BaseModel]) -> Encoder | None:
    """``instance -> payload bytes``, the hook's exact bytes without its calls; None if ``cls`` is not compiled."""
    if cls in encoders:
        return encoders[cls]
    return _compile(cls)[1]


def why_not(cls: type[BaseModel]) -> str | None:
    """Why ``cls`` takes the pydantic path; None when it is compiled."""
    _compile(cls)
    return _why_not.get(cls, "pydantic has not finished building the class")


def forget(cls: type) -> None:
    """Drop what was compiled for ``cls`` (its schema was rebuilt): the next encode or decode compiles it again."""
    with _lock:
        for cache in (decoders, encoders, _why_not):
            cache.pop(cls, None)


ON_REBUILD.append(forget)  # a rebuilt schema is compiled again: a decode answers as pydantic would


def _compile(cls: type[BaseModel]) -> tuple[Decoder | None, Encoder | None]:
    with _lock:
        if cls not in _why_not:
            decode = encode = why = None
            if getattr(cls, "__verl_ctx_compiled__", True) is False:
                why = "the class says compiled=False"
            elif not cls.__pydantic_complete__:
                return None, None  # not cached: pydantic finishes the class on first use, then it is compiled
            else:
                try:
                    decode, encode = Compiler(cls).compile()
                except NotCompiled as e:
                    why = str(e)
            _why_not[cls] = why
            # The hot paths read these two without the lock: each holds a finished entry or none.
            decoders[cls], encoders[cls] = decode, encode
    return decoders.get(cls), encoders.get(cls)
