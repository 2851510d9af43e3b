"""The manifest sensor: cursor per database, observations, expiry run requests, skipped databases."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from slate_ops import admin
from slate_ops.objstore import ObjectStore
from slate_ops.orchestration import DatabaseConfig, SlateDatabasesResource, SlateOpsConfig
from slate_ops.orchestration.checkpoints import slate_ops_manifest_sensor
from slate_ops.orchestration.resources import RESOURCE_KEY
from slate_ops.runtime import ManualRuntime
from tests.support.orchestration import (
    ALPHA,
    BETA,
    add_checkpoint,
    is_cost_observation,
    manifests_of,
    skip_message,
)


def tick(slate: SlateDatabasesResource, cursor: str | None) -> dg.SensorResult | dg.SkipReason:
    context = dg.build_sensor_context(cursor=cursor, resources={RESOURCE_KEY: slate})
    result = slate_ops_manifest_sensor(context)
    assert isinstance(result, dg.SensorResult | dg.SkipReason)
    return result


def observed(result: dg.SensorResult | dg.SkipReason) -> dict[str, dict[str, object]]:
    assert isinstance(result, dg.SensorResult), result
    out: dict[str, dict[str, object]] = {}
    for event in result.asset_events:
        assert isinstance(event, dg.AssetObservation)
        if is_cost_observation(event):
            continue
        assert event.asset_key.path[0] == "slate_ops"
        out[event.asset_key.path[1]] = {k: v.value for k, v in event.metadata.items()}
    return out


def test_first_tick_observes_then_skips_until_a_manifest_changes(
    created: ObjectStore, slate: SlateDatabasesResource, clock: ManualRuntime
) -> None:
    first = tick(slate, None)
    seen = observed(first)
    assert set(seen) == {"alpha", "beta"}
    assert seen["alpha"]["manifest_id"] == 1
    assert (seen["alpha"]["checkpoints"], seen["alpha"]["expired_checkpoints"]) == (0, 0)
    assert (seen["alpha"]["writer_epoch"], seen["alpha"]["compactor_epoch"]) == (0, 0)
    assert isinstance(first, dg.SensorResult) and not first.run_requests
    assert manifests_of(first.cursor) == {"alpha": 1, "beta": 1}

    second = tick(slate, first.cursor)
    assert "no manifest changed" in (skip_message(second) or "")

    add_checkpoint(created, BETA, clock, None, "tag")
    third = tick(slate, first.cursor)
    assert set(observed(third)) == {"beta"}
    assert observed(third)["beta"]["manifest_id"] == 2
    assert observed(third)["beta"]["checkpoints"] == 1
    assert isinstance(third, dg.SensorResult) and third.cursor is not None
    assert manifests_of(third.cursor) == {"alpha": 1, "beta": 2}
    assert skip_message(tick(slate, third.cursor)) is not None


def test_new_manifest_with_expired_checkpoints_requests_a_tagged_expiry_run(
    created: ObjectStore, slate: SlateDatabasesResource, clock: ManualRuntime
) -> None:
    add_checkpoint(created, ALPHA, clock, "10s", "short")
    add_checkpoint(created, BETA, clock, "10s", "short")
    first = tick(slate, None)
    assert isinstance(first, dg.SensorResult) and not first.run_requests  # nothing expired yet
    clock.advance(60)
    # Time alone does not change a manifest: no observation, no run (the schedule covers that).
    assert skip_message(tick(slate, first.cursor)) is not None

    add_checkpoint(created, ALPHA, clock, "1h", "live")
    add_checkpoint(created, BETA, clock, "1h", "live")
    second = tick(slate, first.cursor)
    assert observed(second)["alpha"]["expired_checkpoints"] == 1
    assert isinstance(second, dg.SensorResult)
    requests = {r.tags["slate_ops/db"]: r for r in second.run_requests or []}
    assert set(requests) == {"alpha", "beta"}
    for name, request in requests.items():
        assert request.run_key == f"expire-{name}-3"
        assert request.tags == {"slate_ops/db": name}
    # beta's config says checkpoint_expiry_dry_run: true; alpha expires for real.
    assert requests["alpha"].run_config == {
        "ops": {"expire_checkpoints_op": {"config": {"database": "alpha", "dry_run": False}}}
    }
    assert requests["beta"].run_config["ops"]["expire_checkpoints_op"]["config"]["dry_run"] is True


def test_missing_or_broken_database_is_skipped_without_hiding_the_others(
    created: ObjectStore, config: SlateOpsConfig, clock: ManualRuntime, tmp_path: Path
) -> None:
    broken = SlateOpsConfig(
        databases=[
            DatabaseConfig(name="ghost", store_url=config.databases[0].store_url, path="not/created"),
            # A store URL the config accepts (an unknown scheme it refuses at load) whose root is gone.
            DatabaseConfig(name="bad_url", store_url=(tmp_path / "no-such-root").as_uri(), path="p"),
            *config.databases,
        ]
    )
    slate = SlateDatabasesResource(config=broken).with_clock(clock)
    result = tick(slate, None)
    assert set(observed(result)) == {"alpha", "beta"}
    assert isinstance(result, dg.SensorResult) and result.cursor is not None
    assert manifests_of(result.cursor) == {"alpha": 1, "beta": 1}

    skip = skip_message(tick(slate, result.cursor)) or ""
    assert "ghost" in skip and "bad_url" in skip

    admin.create_db("not/created", created)
    assert set(observed(tick(slate, result.cursor))) == {"ghost"}


def test_all_databases_skipped_says_so(config: SlateOpsConfig, clock: ManualRuntime) -> None:
    slate = SlateDatabasesResource(config=config).with_clock(clock)  # nothing created
    message = skip_message(tick(slate, None)) or ""
    assert message.startswith("all 2 database(s) skipped")
    assert "alpha (DbNotFoundError" in message and "beta (DbNotFoundError" in message


@pytest.mark.parametrize("cursor", ["not json", '["alpha"]', '{"alpha": "one"}'])
def test_unreadable_cursor_observes_everything_again(
    created: ObjectStore, slate: SlateDatabasesResource, cursor: str
) -> None:
    assert set(observed(tick(slate, cursor))) == {"alpha", "beta"}


def test_cursor_drops_databases_no_longer_configured(
    created: ObjectStore, slate: SlateDatabasesResource
) -> None:
    result = tick(slate, json.dumps({"alpha": 0, "retired": 7}))
    assert isinstance(result, dg.SensorResult) and result.cursor is not None
    assert manifests_of(result.cursor) == {"alpha": 1, "beta": 1}
