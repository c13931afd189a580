"""The worker side: ``decode`` (find the envelope, shake hands on the schema, migrate, validate) and ``limits``
(what bounds a decode: fail-fast validators, unknown keys cut short, the collector paused for a large payload).

Imports ``_wire`` and the layers below it; never ``_driver`` (a worker validates nothing a driver composes).
"""
