"""What verl-ctx derives from a schema, and how schemas may evolve.

``schema_info(Schema)`` gives the fingerprint, per-field digests and secret fields an envelope carries;
``diff_schemas(old, new)`` names every change between two exported JSON Schemas with a rule id from
``RULES`` (what ``verl-ctx schema check`` reports).
"""

from ._files.evolution import RULES, Change, Rule, diff_schemas
from ._model.fingerprint import SchemaInfo, schema_info
from ._model.role_context import KNOWN_ROLES

__all__ = [
    "Change",
    "KNOWN_ROLES",
    "RULES",
    "Rule",
    "SchemaInfo",
    "diff_schemas",
    "schema_info",
]
