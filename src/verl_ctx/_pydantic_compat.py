"""Every use of pydantic's private API, in one module: a pydantic release that moves one breaks this file only.

verl-ctx supports ``pydantic>=2.11,<3``. What it needs that pydantic does not publish:

* ``SecretBase``: the base class ``SecretStr``, ``SecretBytes`` and ``Secret[T]`` share (``pydantic.types``);
* ``SECRET_SERIALIZERS``: the functions pydantic serializes those types with, which mark a core-schema node as a
  secret where the node's class is not at hand;
* ``fresh_validator``: a ``SchemaValidator`` built from the given schema alone (pydantic-core reuses the validator a
  model class already has for any model schema it meets, and ``_use_prebuilt=False`` turns that off);
* ``set_fields_set``, ``set_extra``, ``set_private``: the slot descriptors a validated instance's state is written
  through, so the compiled codec can build an instance exactly as pydantic-core does.

``RoleContext.model_rebuild`` also passes pydantic's ``_parent_namespace_depth`` through (its signature is
pydantic's own); it stays beside the method it overrides.
"""

from __future__ import annotations

from typing import Any

import pydantic.types
from pydantic import BaseModel
from pydantic.types import _SecretBase as SecretBase
from pydantic_core import SchemaValidator

__all__ = ["SECRET_SERIALIZERS", "SecretBase", "fresh_validator", "set_extra", "set_fields_set", "set_private"]

# _serialize_secret_field for SecretStr/SecretBytes (and their subclasses), _serialize_secret for Secret[T].
SECRET_SERIALIZERS: tuple[Any, Any] = (
    getattr(pydantic.types, "_serialize_secret_field", None),
    getattr(pydantic.types, "_serialize_secret", None),
)

set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def fresh_validator(schema: Any, config: Any = None) -> SchemaValidator:
    """A validator of ``schema`` alone, never a class's prebuilt one (``TypeError`` from a pydantic-core without
    the switch: the caller decides whether reuse is acceptable)."""
    return SchemaValidator(schema, config, _use_prebuilt=False)
