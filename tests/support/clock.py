"""The ``clock`` fixture: a :class:`ManualRuntime` at a fixed time (2023-11-14). A test module that
needs another date overrides ``clock``; fixtures built on it (``clocked_memory_store``) follow."""

from __future__ import annotations

import pytest

from slate_ops.runtime import ManualRuntime


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(1_700_000_000.0)
