"""Helpers shared by the tests: test modules import from here (and use conftest fixtures),
never from one another (tests/test_dependencies.py checks it)."""
