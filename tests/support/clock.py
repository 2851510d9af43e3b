"""The ``clock`` fixture: a :class:`ManualClock` at a fixed time (2023-11-14). A test module that
needs another date overrides ``clock``; fixtures built on it (``clocked_memory_store``) follow."""

from __future__ import annotations

import pytest

from slate_ops.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)
