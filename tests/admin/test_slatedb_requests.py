"""What the SlateDB handle's frequent calls cost in object-store requests, every client counted at
the S3 endpoint (moto behind benchmarks' latency proxy at +0 ms, so the binding's own requests are
counted as well as slate_ops'), against the counts docs/benchmarks.md reports ("Maintenance:
SlateDB databases vs ours"), so they cannot regress."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from benchmarks.latency_proxy import LatencyProxy
from slate_ops.admin.handle import SlateDbHandle
from slate_ops.config import CheckpointOptions
from slate_ops.objstore import S3Store
from tests.support.s3 import CREDENTIALS
from tests.support.writers import DB, write_slatedb

pytestmark = pytest.mark.s3
sdb = pytest.importorskip("slatedb.uniffi")


@pytest.fixture
def proxied(
    moto_endpoint: str, s3_client: Any, make_bucket: Any
) -> Iterator[tuple[SlateDbHandle, LatencyProxy]]:
    """A SlateDB database on moto, and its handle reaching moto through the proxy."""
    bucket = make_bucket()
    write_slatedb(S3Store(bucket, "pfx", client=s3_client))
    with LatencyProxy(moto_endpoint, 0.0) as proxy:
        store = S3Store(bucket, "pfx", endpoint_url=proxy.endpoint, **CREDENTIALS)
        yield SlateDbHandle(DB, store), proxy


def requests_of(proxy: LatencyProxy, call: Any) -> dict[str, int]:
    proxy.reset()
    call()
    return proxy.kinds


def test_state_reads_the_manifest_once(proxied: tuple[SlateDbHandle, LatencyProxy]) -> None:
    handle, proxy = proxied
    assert requests_of(proxy, handle.state_since) == {"LIST": 2, "GET": 2}  # was 10: 3 manifest reads
    known = handle.describe().manifest_id
    assert requests_of(proxy, lambda: handle.state_since(known)) == {"LIST": 1}
    # The manifest sensors' usual poll: one GET probe of the next manifest (404), no LIST.
    assert requests_of(proxy, lambda: handle.state_since(known, probe=True)) == {"GET": 1}


def test_a_probe_sees_a_changed_slatedb_database(proxied: tuple[SlateDbHandle, LatencyProxy]) -> None:
    handle, _ = proxied
    known = handle.describe().manifest_id
    handle.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1), name="moved"))
    state = handle.state_since(known, probe=True)
    assert state is not None and state.manifest_id > known and "moved" in state.checkpoint_names
    assert handle.state_since(state.manifest_id, probe=True) is None


def test_delete_checkpoint_is_one_manifest_read_and_slatedbs_delete(
    proxied: tuple[SlateDbHandle, LatencyProxy],
) -> None:
    """The binding's own delete costs 5 (LIST, GET manifest, PUT, and a GET of gc/manifest.boundary
    around each manifest access); slate_ops adds one manifest read (3: LIST, GET manifest, GET
    boundary) for its protection check (tags, final checkpoints), the floor with SlateDB 0.17."""
    handle, proxy = proxied
    made = handle.create_checkpoint(CheckpointOptions(lifetime=timedelta(hours=1))).id
    assert requests_of(proxy, lambda: handle.delete_checkpoint(made)) == {"LIST": 1, "GET": 2}  # dry run
    cost = requests_of(proxy, lambda: handle.delete_checkpoint(made, dry_run=False))
    assert cost == {"LIST": 2, "GET": 5, "PUT": 1}, cost
