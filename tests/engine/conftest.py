from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from slate_ops.engine import Db, DbOptions, DbReader, ReaderOptions
from slate_ops.objstore import LocalStore, MemoryStore
from slate_ops.objstore.base import ObjectStore

# Background work only when the test asks for it: explicit flushes make outcomes deterministic.
QUIET = DbOptions(wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1))
QUIET_READER = ReaderOptions(
    manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3)
)


def quiet(**changes: Any) -> DbOptions:
    return QUIET.model_copy(update=changes)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def engine_store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """The engine suite runs on the local store and on moto's S3 server."""
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    make = request.getfixturevalue("make_s3_store")
    store: ObjectStore = make()
    return store


@pytest.fixture
def memory() -> MemoryStore:
    return MemoryStore()


@pytest.fixture(autouse=True)
def stop_leftover_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test that fails half-way must not leave flusher or poller threads running."""
    opened: list[Db | DbReader] = []
    for cls in (Db, DbReader):
        original = cls.__init__

        def recording(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            _original(self, *args, **kwargs)  # a failed open starts no thread
            opened.append(self)

        monkeypatch.setattr(cls, "__init__", recording)
    yield
    for instance in opened:
        instance.crash()


def simulate_crash(db: Db) -> None:
    """Stop ``db`` like a killed process: no WAL flush, no manifest update, buffered state dropped."""
    db.crash()
