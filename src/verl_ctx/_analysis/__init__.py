"""Schema analysis: reading pydantic's core schema, the tree pydantic validates with.

``walk`` is the one traversal (definitions, references, each child and its path step; a visitor walk, a fold and a
rewrite, so each use writes only what it does at a node); ``kinds``
(each field's wire kind) and ``trusted`` (which validators the user declared; the driver's values rebuilt without
running them twice) read through it. Knows pydantic only: imports nothing of verl-ctx but ``_pydantic_compat``.
"""
