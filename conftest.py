"""Loaded for every test path of this repository (tests/ and examples/): the guard that keeps any run from hanging."""

pytest_plugins = ("tests.hang_guard",)
