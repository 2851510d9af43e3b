"""No binding call waits forever: the two measured hangs of SlateDB's binding reproduced for real
and bounded by :class:`CallTimeouts` -- a ``gc/manifest.boundary`` written by hand at the latest
manifest id of a database written by SlateDB's own Db, and a bucket that does not exist on moto's
S3 server -- each ending in a typed error, in bounded time, with nothing written."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.latency_proxy import LatencyProxy
from slate_ops import admin
from slate_ops.admin.handle import SlateDbHandle
from slate_ops.engines.slatedb import LOOP, CallTimeouts, CloneSource, SlateDbAdmin
from slate_ops.engines.slatedb.reader import CheckpointReader
from slate_ops.engines.slatedb.store import check_bucket_exists
from slate_ops.errors import ObjectStoreError, SlateDbError, SlateDbTimeoutError
from slate_ops.objstore import LocalStore, S3Store
from tests.support.s3 import CREDENTIALS
from tests.support.slatedb import write_slatedb
from tests.support.stores import snapshot

# End to end (real binding calls run into their time limits, ~10 s): in CI's second step.
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DB = "dbs/hang"
SHORT = CallTimeouts(metadata=1.0, scan=1.0, gc=1.0, delete=1.0, clone=1.0, writer=1.0)


def test_a_call_past_its_bound_is_cancelled_and_the_loop_serves_the_next() -> None:
    seen: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    started = time.monotonic()
    with pytest.raises(SlateDbTimeoutError) as e:
        LOOP.call("dbs/x", "read_manifest", forever(), 0.2)
    assert time.monotonic() - started < 5
    assert (e.value.db_path, e.value.operation, e.value.timeout_s) == ("dbs/x", "read_manifest", 0.2)
    assert isinstance(e.value, SlateDbError)  # caught with every other binding failure
    msg = str(e.value)
    assert "dbs/x" in msg and "read_manifest" in msg and "0.2 s" in msg
    assert "bucket" in msg and "gc/manifest.boundary" in msg and "timeouts=" in msg

    async def settled() -> list[str]:
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        return seen

    assert LOOP.run(settled(), 5) == ["cancelled"]  # the coroutine was cancelled on the loop


def test_the_default_bounds_are_finite_for_every_kind() -> None:
    t = CallTimeouts()
    assert t.of("metadata") == 60.0
    for kind in ("scan", "gc", "delete", "clone", "writer"):
        assert 60.0 < t.of(kind) < float("inf")  # type: ignore[arg-type]


@pytest.fixture
def at_boundary(sdb: Any, local_dir_store: LocalStore) -> tuple[LocalStore, int, dict[str, str]]:
    """A database written by SlateDB's Db with gc/manifest.boundary written by hand at its latest
    manifest id; the store's listing (key -> etag) after that."""
    write_slatedb(local_dir_store, DB, rounds=2, keys=20)
    m = SlateDbAdmin(DB, local_dir_store).read_manifest()
    assert m is not None
    local_dir_store.put(f"{DB}/gc/manifest.boundary", str(m.id).encode())
    return local_dir_store, m.id, snapshot(local_dir_store)


def test_a_boundary_at_the_latest_manifest_times_out_naming_it(
    at_boundary: tuple[LocalStore, int, dict[str, str]],
) -> None:
    """Measured on 0.17.0: read_manifest and list_checkpoints never return in this state."""
    store, latest, before = at_boundary
    db = SlateDbAdmin(DB, store, timeouts=SHORT)
    for operation, call in (("read_manifest", db.read_manifest), ("list_checkpoints", db.list_checkpoints)):
        started = time.monotonic()
        with pytest.raises(SlateDbTimeoutError) as e:
            call()
        assert time.monotonic() - started < 10
        assert e.value.operation == operation and e.value.timeout_s == 1.0
        msg = str(e.value)
        assert f"{DB}/gc/manifest.boundary is {latest}" in msg and f"latest manifest id {latest}" in msg
        assert "slate-ops verify" in msg
    # the handle, built with the same bound, fails the same way instead of hanging
    handle = SlateDbHandle(DB, store, timeouts=SHORT)
    with pytest.raises(SlateDbTimeoutError, match=r"gc/manifest\.boundary is"):
        handle.describe()
    assert snapshot(store) == before  # nothing written
    # below the latest id the same calls answer at once
    store.put(f"{DB}/gc/manifest.boundary", str(latest - 1).encode())
    m = SlateDbAdmin(DB, store, timeouts=SHORT).read_manifest()
    assert m is not None and m.id == latest


def test_a_detected_open_gets_the_bound_too(
    at_boundary: tuple[LocalStore, int, dict[str, str]],
) -> None:
    """``admin.open`` detects the engine from the store; the handle it returns is bounded by the
    defaults, and a reader by its scan bound."""
    store, _, before = at_boundary
    handle = admin.open(DB, store)
    assert isinstance(handle, SlateDbHandle) and handle.db.timeouts == CallTimeouts()
    started = time.monotonic()
    with pytest.raises(SlateDbTimeoutError, match="open a reader"):
        CheckpointReader(DB, store, "00000000-0000-0000-0000-000000000000", timeouts=SHORT)
    assert time.monotonic() - started < 10
    assert snapshot(store) == before


def test_a_long_call_is_bounded_by_its_own_kind(
    at_boundary: tuple[LocalStore, int, dict[str, str]],
) -> None:
    """Measured: a clone of a source in that state hangs too; its bound is the clone one (1 s
    here), not the metadata one (60 s), and the error names the clone, not the source."""
    store, _, before = at_boundary
    target = SlateDbAdmin("dbs/copy", store, timeouts=CallTimeouts(clone=1.0))
    started = time.monotonic()
    with pytest.raises(SlateDbTimeoutError) as e:
        target.clone_from([CloneSource(DB)])
    assert time.monotonic() - started < 10
    assert (e.value.db_path, e.value.operation, e.value.timeout_s) == ("dbs/copy", "clone", 1.0)
    assert snapshot(store) == before  # no clone written


@pytest.mark.s3
def test_a_missing_bucket_fails_before_the_binding_is_called(
    sdb: Any, make_s3_store: Callable[..., S3Store], s3_client: Any
) -> None:
    """Measured on moto: the binding retries against a missing bucket for more than 15 minutes."""
    existing = make_s3_store()
    missing = S3Store(f"missing-{time.monotonic_ns()}", "pfx", client=existing.client)
    started = time.monotonic()
    with pytest.raises(ObjectStoreError, match=rf"bucket '{missing.bucket}' .* does not exist"):
        SlateDbAdmin(DB, missing)
    with pytest.raises(ObjectStoreError, match="does not exist"):
        SlateDbHandle(DB, missing)
    assert time.monotonic() - started < 10
    buckets = {b["Name"] for b in s3_client.list_buckets()["Buckets"]}
    assert missing.bucket not in buckets  # nothing created


@pytest.mark.s3
def test_a_bucket_gone_after_the_check_times_out_in_the_binding(
    sdb: Any, moto_endpoint: str, make_bucket: Callable[[], str], s3_client: Any
) -> None:
    """The bucket passes the one HeadBucket check, then is deleted: the binding's own call retries
    against it, the bound ends that with the typed error, and the cancel stops the retries (every
    request counted at the endpoint, the binding's included)."""
    bucket = make_bucket()
    with LatencyProxy(moto_endpoint, 0.0) as proxy:
        store = S3Store(bucket, "pfx", endpoint_url=proxy.endpoint, **CREDENTIALS)
        db = SlateDbAdmin(DB, store, timeouts=SHORT)
        s3_client.delete_bucket(Bucket=bucket)
        check_bucket_exists(store)  # seen once in this process: not asked again
        proxy.reset()
        started = time.monotonic()
        with pytest.raises(SlateDbTimeoutError) as e:
            db.create_checkpoint()
        assert time.monotonic() - started < 10
        assert proxy.kinds.get("LIST", 0) >= 1  # the binding was retrying
        proxy.reset()
        time.sleep(2)
        assert proxy.kinds == {}  # cancelled: no request after the bound
    assert e.value.operation == "create_checkpoint" and "bucket does not exist" in str(e.value)
    buckets = {b["Name"] for b in s3_client.list_buckets()["Buckets"]}
    assert bucket not in buckets  # nothing written (no bucket to write in)
