"""Checkpoint expiry per SlateDB's Checkpoints and Clones design: an ``expire_time_s`` of 0 means no
expiry, exactly like None.

Regressions: ``Checkpoint.is_expired`` took a stored 0 (what SlateDB writes for "never") for a
checkpoint that expired in 1970, so expiry and GC removed it; and ``ReaderOptions`` refused
``checkpoint_lifetime=None`` (spec: ``Option<Duration>``, a reader checkpoint without expiry).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from pydantic import ValidationError

from slate_ops import Db, DbReader, ReaderOptions, admin
from slate_ops.engine.options import DbOptions
from slate_ops.gc.snapshot import pinned_since
from slate_ops.manifest.checkpoints import live_checkpoint
from slate_ops.manifest.model import Checkpoint, Manifest, WriterCheckpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime

NOW = 1_700_000_000.0
QUIET = DbOptions(wal_flush_interval=timedelta(hours=1), manifest_poll_interval=timedelta(hours=1))


def checkpoint(expire_time_s: int | None) -> Checkpoint:
    return Checkpoint(uuid.uuid4(), manifest_id=1, create_time_s=int(NOW) - 10, expire_time_s=expire_time_s)


@pytest.mark.parametrize(
    ("expire_time_s", "expires_at", "expired"),
    [
        (None, None, False),
        (0, None, False),  # the spec's "never"; not 1970
        (int(NOW) + 1, int(NOW) + 1, False),
        (int(NOW), int(NOW), True),
        (1, 1, True),
    ],
)
def test_zero_and_none_both_mean_never(
    expire_time_s: int | None, expires_at: int | None, expired: bool
) -> None:
    c = checkpoint(expire_time_s)
    assert c.expires_at == expires_at
    assert c.is_expired(NOW) is expired
    assert c.is_expired(NOW * 1000) is (expires_at is not None)


def test_live_checkpoint_and_gc_treat_zero_as_never() -> None:
    never = checkpoint(0)
    manifest = Manifest(checkpoints=(never,))
    assert live_checkpoint(manifest, never.id, NOW, "memory://db") == never
    # GC keeps the manifest a checkpoint pins while the checkpoint had not expired by the cutoff.
    assert pinned_since([manifest], cutoff=NOW) == {1}
    assert pinned_since([Manifest(checkpoints=(checkpoint(1),))], cutoff=NOW) == set()


def test_expire_checkpoints_keeps_a_stored_zero() -> None:
    """End to end through the manifest codec: a stored 0 survives expiry, a past time does not."""
    store = MemoryStore()
    clock = ManualRuntime(NOW)
    admin.create_db("db", store)
    never, old = checkpoint(0), checkpoint(int(NOW) - 1)
    ManifestStore(store, "db").update(lambda current: current.value.with_changes(checkpoints=(never, old)))
    stored = {c.id: c for c in admin.list_checkpoints("db", store)}
    assert stored[never.id].expire_time_s == 0 and stored[never.id].expires_at is None

    report = admin.expire_checkpoints("db", store, dry_run=False, clock=clock)
    assert [c.id for c in report.expired] == [old.id]
    assert [c.id for c in admin.list_checkpoints("db", store)] == [never.id]


# --- ReaderOptions(checkpoint_lifetime=None) --------------------------------------------------------


def test_reader_options_accept_no_lifetime_and_still_check_a_given_one() -> None:
    options = ReaderOptions(checkpoint_lifetime=None, manifest_poll_interval=timedelta(hours=1))
    assert options.checkpoint_lifetime is None
    with pytest.raises(ValidationError, match="must exceed twice"):
        ReaderOptions(checkpoint_lifetime=timedelta(seconds=20), manifest_poll_interval=timedelta(seconds=10))


def test_a_reader_without_lifetime_keeps_a_never_expiring_checkpoint() -> None:
    store = MemoryStore()
    clock = ManualRuntime(NOW)
    with Db.open("db", store, QUIET, clock=clock) as db:
        db.put(b"a", b"1", await_durable=True)
        options = ReaderOptions(checkpoint_lifetime=None, manifest_poll_interval=timedelta(hours=1))
        manifests = ManifestStore(store, "db")
        reader = DbReader.open("db", store, options=options, clock=clock)
        ours = manifests.read_latest_required().value.checkpoint(reader.checkpoint_id)
        assert ours is not None and ours.expire_time_s is None and ours.expires_at is None

        versions = len(manifests.list())
        clock.advance(10 * 365 * 86400)  # ten years: nothing to refresh, nothing expired
        reader.poll()
        assert len(manifests.list()) == versions  # the poll wrote nothing
        assert admin.expire_checkpoints("db", store, dry_run=True, clock=clock).expired == ()
        assert reader.get(b"a") == b"1"

        # Given an expiry by hand, it is re-established once expired — still without expiry.
        manifests.update(
            lambda current: current.value.with_changes(
                checkpoints=tuple(
                    replace(c, expire_time_s=int(clock.now()) - 1) if c.id == reader.checkpoint_id else c
                    for c in current.value.checkpoints
                )
            )
        )
        old_id = reader.checkpoint_id
        reader.poll()
        assert reader.checkpoint_id != old_id
        renewed = manifests.read_latest_required().value.checkpoint(reader.checkpoint_id)
        assert renewed is not None and renewed.expires_at is None

        reader.close()  # removes it
        remaining = manifests.read_latest_required().value.checkpoints
        assert [c for c in remaining if not isinstance(c.metadata, WriterCheckpoint)] == []
