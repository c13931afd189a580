"""The driver side: ``validate`` (a verl config's ``extra_context`` before launch, every role, every error at once),
its parts (``unknown_keys``, ``lint``, ``roles``: which roles verl will start), what it returns (``contextset``),
and importing the user's modules by name (``modules``).

Imports ``_wire`` and the layers below it; never ``_worker``.
"""
