"""Fixtures of the admin tests."""

from __future__ import annotations

import pytest

from slate_ops import admin
from slate_ops.admin.handle import DatabaseHandle
from slate_ops.objstore import MemoryStore
from slate_ops.objstore.base import ObjectStore
from tests.support.writers import DB, write_slate_ops, write_slatedb

ACME = "tenants/acme"


@pytest.fixture
def acme_store(clocked_memory_store: MemoryStore) -> MemoryStore:
    """A clocked memory store holding one empty database, ``tenants/acme`` (the ``DB`` of the
    checkpoint, tag, tag-policy and rollback tests)."""
    admin.create_db(ACME, clocked_memory_store)
    return clocked_memory_store


@pytest.fixture(params=["slate_ops", "slatedb"])
def engine_name(request: pytest.FixtureRequest) -> str:
    """Each engine a database handle works with: ours, and SlateDB's through its binding."""
    return str(request.param)


@pytest.fixture
def handle(engine_name: str, engine_store: ObjectStore) -> DatabaseHandle:
    """A database written by ``engine``'s own writer, opened by detection."""
    if engine_name == "slate_ops":
        write_slate_ops(engine_store)
    else:
        write_slatedb(engine_store)
    return admin.open(DB, engine_store)
