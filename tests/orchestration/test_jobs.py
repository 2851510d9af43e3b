"""The checkpoint expiry job and schedule: dry run by default, real run on request, tagged runs."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest

from jobs import checkpoint_expiry_job, checkpoint_expiry_schedule
from slate_ops import admin
from slate_ops.admin import CheckpointExpiryReport
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import SlateDatabasesResource
from slate_ops.orchestration.checkpoints import expire_checkpoints_op
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import ALPHA, add_checkpoint, op_metadata, run_op


@pytest.fixture
def checkpoints(created: ObjectStore, clock: ManualRuntime) -> dict[str, str]:
    """In alpha: "old" expired 50 min ago by the manual clock; "live" and "forever" have not.

    The manual clock starts in 2023, so by the system clock "live" would have expired too: the
    job must take time from the resource's clock.
    """
    ids = {
        "old": add_checkpoint(created, ALPHA, clock, "10min", "old|pipe"),
        "live": add_checkpoint(created, ALPHA, clock, "2h", "live"),
        "forever": add_checkpoint(created, ALPHA, clock, None, "forever"),
    }
    clock.advance(3600)
    return ids


def run(
    defs: dg.Definitions,
    slate: SlateDatabasesResource,
    config: dict[str, object] | None,
    tags: dict[str, str] | None,
) -> dg.ExecuteInProcessResult:
    return run_op(defs.resolve_job_def("checkpoint_expiry_job"), "expire_checkpoints_op", slate, config, tags)


def names(store: ObjectStore) -> set[str | None]:
    return {c.name for c in admin.list_checkpoints(ALPHA, store)}


def test_dry_run_is_the_default_and_removes_nothing(
    defs: dg.Definitions,
    slate: SlateDatabasesResource,
    created: ObjectStore,
    checkpoints: dict[str, str],
) -> None:
    before = admin.read_manifest(ALPHA, created).id
    result = run(defs, slate, {"database": "alpha"}, {"slate_ops/db": "alpha"})
    assert result.success
    report = result.output_for_node("expire_checkpoints_op")
    assert isinstance(report, CheckpointExpiryReport)
    assert report.dry_run is True
    assert [str(c.id) for c in report.expired] == [checkpoints["old"]]
    assert admin.read_manifest(ALPHA, created).id == before
    assert names(created) == {"old|pipe", "live", "forever"}

    metadata = op_metadata(result)
    assert (metadata["database"], metadata["dry_run"], metadata["expired_count"]) == ("alpha", True, 1)
    assert metadata["manifest_id"] == before
    table = str(metadata["expired_checkpoints"])
    assert table.startswith("Would remove (dry run) 1 checkpoint(s)")
    assert "| id | name | manifest_id | created at (UTC) | expired at (UTC) |" in table
    assert f"| {checkpoints['old']} | old\\|pipe | 2 | 2023-11-14T22:13:20Z | 2023-11-14T22:23:20Z |" in table
    assert checkpoints["live"] not in table and checkpoints["forever"] not in table


def test_real_run_removes_only_expired_checkpoints(
    defs: dg.Definitions,
    slate: SlateDatabasesResource,
    created: ObjectStore,
    checkpoints: dict[str, str],
) -> None:
    before = admin.read_manifest(ALPHA, created).id
    result = run(defs, slate, {"database": "alpha", "dry_run": False}, {"slate_ops/db": "alpha"})
    assert result.success
    assert names(created) == {"live", "forever"}
    metadata = op_metadata(result)
    assert (metadata["dry_run"], metadata["expired_count"]) == (False, 1)
    assert metadata["manifest_id"] == before + 1 == admin.read_manifest(ALPHA, created).id
    assert str(metadata["expired_checkpoints"]).startswith("Removed 1 checkpoint(s)")
    assert checkpoints["old"] in str(metadata["expired_checkpoints"])

    again = run(defs, slate, {"database": "alpha", "dry_run": False}, {"slate_ops/db": "alpha"})
    assert op_metadata(again)["expired_count"] == 0
    assert str(op_metadata(again)["expired_checkpoints"]) == "Removed: no expired checkpoints."
    assert names(created) == {"live", "forever"}


def test_database_defaults_to_the_run_tag(
    defs: dg.Definitions, slate: SlateDatabasesResource, created: ObjectStore, checkpoints: dict[str, str]
) -> None:
    result = run(defs, slate, None, {"slate_ops/db": "alpha"})
    assert result.success
    assert op_metadata(result)["database"] == "alpha"
    assert op_metadata(result)["expired_count"] == 1


@pytest.mark.parametrize(
    ("op_config", "tags", "error"),
    [
        ({"database": "alpha"}, {"slate_ops/db": "beta"}, "must agree"),
        (None, None, "no database given"),
        ({"database": "ghost"}, {"slate_ops/db": "ghost"}, "no database named 'ghost'"),
    ],
)
def test_wrong_target_fails_the_run(
    defs: dg.Definitions,
    slate: SlateDatabasesResource,
    created: ObjectStore,
    checkpoints: dict[str, str],
    op_config: dict[str, object] | None,
    tags: dict[str, str] | None,
    error: str,
) -> None:
    result = run(defs, slate, op_config, tags)
    assert not result.success
    failure = result.failure_data_for_node("expire_checkpoints_op")
    assert failure is not None and error in str(failure.error)
    assert names(created) == {"old|pipe", "live", "forever"}


def test_op_invoked_directly(
    slate: SlateDatabasesResource, created: ObjectStore, checkpoints: dict[str, str]
) -> None:
    context = dg.build_op_context(resources={RESOURCE_KEY: slate}, op_config={"database": "alpha"})
    output = expire_checkpoints_op(context)
    assert isinstance(output, dg.Output)
    assert [str(c.id) for c in output.value.expired] == [checkpoints["old"]]


def test_schedule_requests_a_tagged_run_per_database_with_expired_checkpoints(
    slate: SlateDatabasesResource, created: ObjectStore, checkpoints: dict[str, str]
) -> None:
    when = datetime(2024, 1, 2, 3, 0, tzinfo=UTC)
    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    requests = checkpoint_expiry_schedule(context)
    assert isinstance(requests, list) and len(requests) == 1  # beta has nothing expired
    (request,) = requests
    assert request.run_key == "expire-alpha-20240102T0300Z"
    assert request.tags == {"slate_ops/db": "alpha"}
    result = checkpoint_expiry_job.execute_in_process(
        run_config=request.run_config, tags=request.tags, resources={RESOURCE_KEY: slate}
    )
    assert result.success
    assert names(created) == {"live", "forever"}

    context = dg.build_schedule_context(scheduled_execution_time=when, resources={RESOURCE_KEY: slate})
    skip = checkpoint_expiry_schedule(context)
    assert isinstance(skip, dg.SkipReason)
    assert skip.skip_message == "no database has expired checkpoints"


def test_sensor_run_request_executes_the_job(
    slate: SlateDatabasesResource, created: ObjectStore, checkpoints: dict[str, str], clock: ManualRuntime
) -> None:
    from slate_ops.orchestration.checkpoints import slate_ops_manifest_sensor

    result = slate_ops_manifest_sensor(dg.build_sensor_context(cursor=None, resources={RESOURCE_KEY: slate}))
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests or []
    assert request.tags == {"slate_ops/db": "alpha"}
    done = checkpoint_expiry_job.execute_in_process(
        run_config=request.run_config, tags=request.tags, resources={RESOURCE_KEY: slate}
    )
    assert done.success
    assert names(created) == {"live", "forever"}
