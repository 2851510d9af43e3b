"""Tag policies: periods, name formats, creation, retention, dry runs, idempotence, hand-made tags."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from slate_ops import Db, DbReader, admin
from slate_ops.admin.tag_policy import TagPolicy, apply_tag_policy
from slate_ops.errors import DbDestroyedError
from slate_ops.objstore import MemoryStore
from slate_ops.runtime import ManualRuntime
from tests.support.engine import quiet
from tests.support.stores import snapshot

DB = "tenants/acme"
DAY = 86_400.0


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> ManualRuntime:
    return ManualRuntime(at("2024-01-05T01:00"))


def names(store: MemoryStore) -> list[str]:
    return sorted(admin.list_tags(DB, store).column("tag_name").to_pylist())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"create_time": "24:00"}, "hh:mm"),
        ({"create_time": "7:30"}, "hh:mm"),
        ({"create_interval_days": 0}, "greater than or equal to 1"),
        ({"num_retained_max": 0}, "greater than or equal to 1"),
        ({"expire_after": "soon"}, "cannot parse duration"),
        ({"name_format": "auto-%Y-%m"}, "does not identify that period"),  # two days, one name
        ({"name_format": "auto-%y%m%d"}, "does not identify that period"),  # 2000 and 2100 collide
        ({"name_format": "nightly"}, "does not identify that period"),
        ({"name_format": "%Y %m %d"}, "whitespace"),
        ({"name_format": "auto-%Y-%m-%d", "unknown": 1}, "Extra inputs"),
    ],
)
def test_invalid_policies_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TagPolicy.model_validate(fields)


def test_periods_start_at_create_time_every_interval_from_the_epoch_day() -> None:
    daily = TagPolicy(create_time="02:30")
    assert daily.tag_name(daily.due_period(at("2024-01-05T01:00"))) == "auto-2024-01-04"
    assert daily.tag_name(daily.due_period(at("2024-01-05T02:30"))) == "auto-2024-01-05"
    assert daily.period_start(daily.due_period(at("2024-01-05T02:29"))) == at("2024-01-04T02:30")
    every3 = TagPolicy(create_interval_days=3, name_format="every3-%Y-%m-%dT%H%M")
    start = every3.period_start(every3.due_period(at("2024-01-05T12:00")))
    assert start == at("2024-01-03T00:00") and (start // DAY) % 3 == 0  # epoch day 19725 = 3 * 6575
    assert every3.period_of("every3-2024-01-03T0000") == every3.due_period(start)
    assert every3.period_of("every3-2024-01-04T0000") is None  # not a period start
    assert daily.period_of("auto-2024-01-04") == daily.due_period(at("2024-01-04T03:00"))
    assert daily.period_of("release-1") is None and daily.period_of("auto-2024-01-04x") is None


def test_dry_run_writes_nothing_and_reports_exactly_the_real_run(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    policy = TagPolicy(num_retained_max=2)
    checkpoint_id = uuid.uuid4()
    before = snapshot(acme_store)
    dry = apply_tag_policy(DB, acme_store, policy, clock=clock, new_id=lambda: checkpoint_id)
    assert snapshot(acme_store) == before
    assert dry.dry_run and dry.due_tag == "auto-2024-01-05" and dry.created is not None
    real = apply_tag_policy(DB, acme_store, policy, dry_run=False, clock=clock, new_id=lambda: checkpoint_id)
    assert real == dataclasses.replace(dry, dry_run=False)
    assert names(acme_store) == ["auto-2024-01-05"] and real.manifest_id == 2


def test_applying_twice_at_the_same_time_changes_nothing(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    policy = TagPolicy(num_retained_max=1, expire_after="2days")
    first = apply_tag_policy(DB, acme_store, policy, dry_run=False, clock=clock)
    assert first.created is not None and first.deleted == ()
    before = snapshot(acme_store)
    for dry_run in (True, False):
        again = apply_tag_policy(DB, acme_store, policy, dry_run=dry_run, clock=clock)
        assert again.created is None and again.deleted == () and again.manifest_id == first.manifest_id
        assert again.retained == ("auto-2024-01-05",)
    assert snapshot(acme_store) == before


def test_days_pass_tags_are_created_and_only_the_newest_are_kept(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    manual = admin.create_tag(DB, acme_store, "release-1", clock=clock)
    look_alike = admin.create_tag(DB, acme_store, "auto-2024-01-01-manual", clock=clock)
    policy = TagPolicy(create_time="02:30", num_retained_max=3)
    for _ in range(5):
        apply_tag_policy(DB, acme_store, policy, dry_run=False, clock=clock)
        clock.advance(DAY)
    assert names(acme_store) == [
        "auto-2024-01-01-manual",
        "auto-2024-01-06",
        "auto-2024-01-07",
        "auto-2024-01-08",
        "release-1",
    ]
    report = apply_tag_policy(DB, acme_store, policy, dry_run=False, clock=clock)
    assert report.created is not None and report.created.name == "auto-2024-01-09"
    assert [(d.tag.name, d.reason) for d in report.deleted] == [("auto-2024-01-06", "num_retained_max")]
    assert report.retained == ("auto-2024-01-09", "auto-2024-01-08", "auto-2024-01-07")
    tags = {c.name: c.id for c in admin.list_checkpoints(DB, acme_store)}
    assert tags["tag:release-1"] == manual.checkpoint_id  # hand-made tags are never touched
    assert tags["tag:auto-2024-01-01-manual"] == look_alike.checkpoint_id


def test_expired_tags_are_deleted_and_never_created_again(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    policy = TagPolicy(create_time="00:00", expire_after="36h")
    admin.create_tag(DB, acme_store, "auto-2023-12-01", clock=clock)  # an old one, by name the policy's
    report = apply_tag_policy(DB, acme_store, policy, dry_run=False, clock=clock)
    assert [(d.tag.name, d.reason) for d in report.deleted] == [("auto-2023-12-01", "expired")]
    assert report.deleted[0].period_start_s == at("2023-12-01T00:00")
    assert names(acme_store) == ["auto-2024-01-05"]
    clock.advance(DAY)
    apply_tag_policy(DB, acme_store, policy, dry_run=False, clock=clock)
    assert names(acme_store) == ["auto-2024-01-05", "auto-2024-01-06"]
    clock.advance(DAY / 2)  # 2024-01-06T13:00: the 01-05 tag is 37 h old
    report = apply_tag_policy(DB, acme_store, policy, dry_run=False, clock=clock)
    assert [d.tag.name for d in report.deleted] == ["auto-2024-01-05"] and report.created is None
    # A policy whose tags expire within their own period does not create the due one once expired.
    short = TagPolicy(create_time="00:00", expire_after="1h", name_format="short-%Y-%m-%d")
    report = apply_tag_policy(DB, acme_store, short, dry_run=False, clock=clock)
    assert report.created is None and report.due_tag == "short-2024-01-06"
    assert names(acme_store) == ["auto-2024-01-06"]


def test_the_created_tag_covers_writes_only_in_the_wal(acme_store: MemoryStore, clock: ManualRuntime) -> None:
    with Db.open(DB, acme_store, quiet(), clock=clock) as db:
        db.put(b"a", b"l0")
        db.flush_memtable()
        db.put(b"b", b"wal-only")
        db.flush()
        report = apply_tag_policy(DB, acme_store, TagPolicy(), dry_run=False, clock=clock)
        db.put(b"c", b"after")
    assert report.created is not None
    reader = DbReader.open(DB, acme_store, checkpoint_id=report.created.checkpoint_id, clock=clock)
    try:
        assert dict(reader.scan()) == {b"a": b"l0", b"b": b"wal-only"}
    finally:
        reader.close()


def test_destroyed_database_is_refused_and_nothing_is_written(
    acme_store: MemoryStore, clock: ManualRuntime
) -> None:
    admin.destroy(DB, acme_store, clock=clock, dry_run=False)
    before = snapshot(acme_store)
    for dry_run in (True, False):
        with pytest.raises(DbDestroyedError):
            apply_tag_policy(DB, acme_store, TagPolicy(), dry_run=dry_run, clock=clock)
    assert snapshot(acme_store) == before


def test_expire_after_is_a_duration() -> None:
    assert TagPolicy(expire_after="7days").expire_after == timedelta(days=7)
    assert TagPolicy(expire_after=3600).expire_after == timedelta(hours=1)
