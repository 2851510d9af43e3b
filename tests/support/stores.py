"""Store fixtures, by what they give: ``memory_store``, ``clocked_memory_store`` (objects stamped
by the ``clock`` fixture), ``local_dir_store`` (a created directory), and the parametrized
``engine_store`` (local, S3), ``local_or_s3_store`` (created directory, S3) and ``any_store``
(memory, local, S3); plus :func:`snapshot`, to prove an operation touched nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from slate_ops.objstore import LocalStore, MemoryStore, S3Store
from slate_ops.objstore.base import ObjectStore
from slate_ops.runtime import ManualRuntime


@pytest.fixture
def memory_store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def clocked_memory_store(clock: ManualRuntime) -> MemoryStore:
    """Objects stamped with ``clock``'s time, so ages (GC's min ages, tag retention) are exact and
    advancing the clock makes them really pass."""
    return MemoryStore("clocked", now=lambda: datetime.fromtimestamp(clock.now(), UTC))


@pytest.fixture
def local_dir_store(tmp_path: Path) -> LocalStore:
    """A :class:`LocalStore` on ``tmp_path/store``, created (SlateDB's binding needs the root of a
    local store to exist)."""
    root = tmp_path / "store"
    root.mkdir()
    return LocalStore(root)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def engine_store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """Where the engine's suites run: a local directory (not created: the store makes it on the
    first write), or a bucket with a key prefix on moto's S3 server on loopback."""
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    make: Callable[..., S3Store] = request.getfixturevalue("make_s3_store")
    return make()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def local_or_s3_store(request: pytest.FixtureRequest) -> ObjectStore:
    """Where SlateDB's binding can work: a local directory (created), or a bucket with a key
    prefix on moto's S3 server on loopback."""
    if request.param == "local":
        return request.getfixturevalue("local_dir_store")  # type: ignore[no-any-return]
    make: Callable[..., S3Store] = request.getfixturevalue("make_s3_store")
    return make()


@pytest.fixture(params=["memory", "local", pytest.param("s3", marks=pytest.mark.s3)])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """Every kind of store: memory, a local directory, a bucket on moto's S3 server."""
    if request.param == "memory":
        return MemoryStore(f"test-{uuid.uuid4().hex}")
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    make: Callable[..., S3Store] = request.getfixturevalue("make_s3_store")
    return make()


def snapshot(store: ObjectStore, prefix: str = "") -> dict[str, str]:
    """Every object's key and etag: equal snapshots prove an operation wrote and deleted nothing."""
    return {meta.key: meta.etag for meta in store.list(prefix)}
