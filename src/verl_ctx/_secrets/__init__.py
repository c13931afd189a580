"""Secrets: which values are secrets, where a schema can hold one, and the one redaction every output goes through.

``plan`` (a value's secrets, a schema's secret paths, as a visitor of ``_analysis.walk``), ``redact`` (the secrets
this process has seen, masked in any encoding; the loggers and streams that apply it), ``withhold`` (command-line
values other libraries echo). Imports ``_analysis`` and ``_pydantic_compat`` only: ``errors`` redacts through
this package, so nothing here may import ``errors``.
"""
