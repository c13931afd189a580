"""Schema files: ``export`` (a JSON Schema per role, the config-file schema, the lock file) and ``evolution`` (an
exported schema against today's: every change, each named by a rule, judged as a resume would judge it).

The top of the core: may import the driver and worker sides (a lock file's check decodes as a worker would).
"""
