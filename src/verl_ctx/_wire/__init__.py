"""The wire: a context as plain data and back. ``envelope`` (one role's context, its store reference, their text
form), ``codec`` (a context's payload), ``msgpack`` (the format and msgspec's hooks), ``compiled`` (the generated
fast path), ``budget`` (a payload's decoding cost, bounded before it is parsed), ``sources`` (where a context is
found in whatever object a worker holds).

Imports ``_model``, ``_analysis``, ``errors`` and ``_pydantic_compat``; never the driver or worker side.
"""
