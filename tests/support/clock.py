"""The ``clock`` fixture: a :class:`ManualRuntime` at a fixed time (2023-11-14). A test module that
needs another date overrides ``clock``; fixtures built on it (``clocked_memory_store``) follow.

Plus :func:`sleep_until_expired`, for a checkpoint whose expiry another process checks on the real
clock (a Spark task, a Dagster sensor): the exact wait instead of a fixed sleep."""

from __future__ import annotations

import math
import time

import pytest

from slate_ops.runtime import SYSTEM_RUNTIME, ManualRuntime

EXPIRY_MARGIN_S = 0.05
"""Past the expiry time, so that ``expiry <= now`` holds on any reader's clock reading."""


def sleep_until_expired(created_by: float, lifetime_s: float) -> None:
    """Sleep until a checkpoint of ``lifetime_s`` created by ``created_by`` (the real clock's
    ``now()`` once the create returned) has expired: its expiry is at most
    ``ceil(created_by + lifetime_s)`` (slate_ops rounds expiry times up to whole seconds)."""
    time.sleep(max(0.0, math.ceil(created_by + lifetime_s) - SYSTEM_RUNTIME.now()) + EXPIRY_MARGIN_S)


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(1_700_000_000.0)
