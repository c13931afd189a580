"""The model: ``RoleContext`` (the base class a user declares a role's schema with), the registry of which schema
reads which role, what is derived from a schema once per class (fingerprint, field digests), and pydantic's
validation errors as verl-ctx's ``FieldError`` list.

Imports ``errors``, ``_secrets`` and ``_analysis``. What layers above derive from a schema (the compiled codec)
registers in ``role_context.ON_REBUILD`` rather than being named here.
"""
