"""Fixtures of the transaction tests."""

from __future__ import annotations

import pytest

from slate_ops.objstore import CountingStore, MemoryStore


@pytest.fixture
def counting(memory_store: MemoryStore) -> CountingStore:
    return CountingStore(memory_store)
