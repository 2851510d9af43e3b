"""Test support: fixtures (loaded as pytest plugins by tests/conftest.py) and helpers (imported by
tests normally), one module per concern. See README.md, "Tests"."""
