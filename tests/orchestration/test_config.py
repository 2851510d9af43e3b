"""The databases config file: defaults, environment, and errors that name the file and field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from slate_ops.compaction import CompactorOptions
from slate_ops.engine import ReaderOptions
from slate_ops.errors import ConfigError
from slate_ops.gc import GcOptions
from slate_ops.orchestration import SlateDatabasesResource
from slate_ops.orchestration.config import S3_CREDENTIAL_ENV, load_config
from slate_ops.runtime import ManualRuntime


def write(tmp_path: Path, text: str, name: str = "databases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_embedded_default_is_the_demo_database_its_clone_and_shards_under_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SLATE_OPS_STORE")
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert [(db.name, db.parent, db.rescaled_from) for db in config.databases] == [
        ("demo", None, None),
        ("demo_clone", "demo", None),
        ("demo_low", None, ["demo"]),
        ("demo_high", None, ["demo"]),
    ]
    assert {db.store_url for db in config.databases} == {(tmp_path / ".slate").as_uri()}
    assert config.databases[0].store_url.startswith("file:///")


def test_embedded_default_uses_slate_ops_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLATE_OPS_STORE", "memory://elsewhere")
    assert load_config().databases[0].store_url == "memory://elsewhere"


def test_env_names_the_file_and_the_argument_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from_env = write(
        tmp_path, "databases:\n  - {name: env_db, store_url: 'memory://a', path: p}\n", "env.yaml"
    )
    from_arg = write(
        tmp_path, "databases:\n  - {name: arg_db, store_url: 'memory://a', path: p}\n", "arg.yaml"
    )
    monkeypatch.setenv("SLATE_OPS_CONFIG", str(from_env))
    assert [db.name for db in load_config().databases] == ["env_db"]
    assert [db.name for db in load_config(str(from_arg)).databases] == ["arg_db"]


def test_full_entry_and_env_expansion(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BUCKET", "prod-bucket")
    monkeypatch.delenv("NOT_SET", raising=False)
    path = write(
        tmp_path,
        """
databases:
  - name: orders
    store_url: s3://${BUCKET}/slate?endpoint_url=${NOT_SET:-http://127.0.0.1:9000}
    path: tenants/orders
    checkpoint_expiry_dry_run: true
    description: Orders
  - name: users
    path: users
""",
    )
    orders, users = load_config(str(path)).databases
    assert orders.store_url == "s3://prod-bucket/slate?endpoint_url=http://127.0.0.1:9000"
    assert (orders.path, orders.checkpoints.expiry_dry_run, orders.description) == (
        "tenants/orders",
        True,
        "Orders",
    )
    # An entry without store_url gets $SLATE_OPS_STORE (set by the autouse fixture).
    assert users.store_url.startswith("file:///") and users.checkpoints.expiry_dry_run is False


@pytest.mark.parametrize(
    ("text", "field", "detail"),
    [
        (
            "databases:\n  - {name: a, store_url: 'memory://x', path: p}\n"
            "  - {name: a, store_url: 'memory://y', path: q}\n",
            "databases",
            "repeated: a",
        ),
        ("databases:\n  - {name: my-db, store_url: 'memory://x', path: p}\n", "databases.0.name", "pattern"),
        (
            "databases:\n  - {name: a, store_ur: 'memory://x', path: p}\n",
            "databases.0.store_ur",
            "not permitted",
        ),
        ("databases:\n  - {name: a, store_url: 'memory://x'}\n", "databases.0.path", "field required"),
        ("databases: []\n", "databases", "at least 1"),
        ("database:\n  - {name: a, path: p}\n", "databases", "field required"),
        ("database:\n  - {name: a, path: p}\n", "database", "not permitted"),
        (
            "databases:\n  - {name: a, store_url: '${NO_SUCH_VAR}', path: p}\n",
            "databases.0.store_url",
            "NO_SUCH_VAR",
        ),
    ],
)
def test_invalid_file_names_file_and_field(tmp_path: Path, text: str, field: str, detail: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    message = str(raised.value)
    assert str(path) in message
    assert f"{field}:" in message
    assert detail in message


@pytest.mark.parametrize("text", ["databases: [unclosed\n", "- just\n- a list\n", ""])
def test_bad_yaml_names_the_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=str(path)):
        load_config(str(path))


def test_missing_file_from_env_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    monkeypatch.setenv("SLATE_OPS_CONFIG", str(missing))
    with pytest.raises(ConfigError, match=f"cannot read slate_ops config {missing}"):
        load_config()


def test_lookup_of_unknown_database_lists_known_ones() -> None:
    config = load_config()
    assert config.database("demo").name == "demo"
    with pytest.raises(ConfigError, match=r"no database named 'ghost'.*configured: demo"):
        config.database("ghost")


def test_policies_are_grouped_per_database(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
databases:
  - name: orders
    store_url: memory://policies
    path: orders
    checkpoints: {expiry_dry_run: true, reader_lifetime: 30min, compaction_lifetime: 1h}
    compaction: {l0_threshold: 3, executor: spark, full: true}
    gc: {dry_run: true, interval_hours: 24, wal_min_age: 10min, compacted_min_age: 1h}
    tag_policy: {create_time: "02:00", num_retained_max: 7}
  - name: plain
    store_url: memory://policies
    path: plain
""",
    )
    orders, plain = load_config(str(path)).databases
    assert orders.checkpoints.expiry_dry_run and orders.reader_options().checkpoint_lifetime == timedelta(
        minutes=30
    )
    options = orders.compactor_options()
    assert (options.min_sources, options.compaction_checkpoint_lifetime) == (3, timedelta(hours=1))
    assert (orders.compaction.executor, orders.compaction.full) == ("spark", True)
    gc = orders.gc.options()
    assert (gc.wal_min_age, gc.compacted_min_age, gc.manifest_min_age) == (
        timedelta(minutes=10),
        timedelta(hours=1),
        timedelta(minutes=5),
    )
    assert orders.gc.dry_run and orders.gc.due(datetime(2024, 1, 2, 0, tzinfo=UTC))
    assert not orders.gc.due(datetime(2024, 1, 2, 6, tzinfo=UTC))
    # Defaults: SlateDB's values, real automated runs, GC every 6 hours, local executor.
    assert plain.compactor_options() == CompactorOptions()
    assert plain.reader_options() == ReaderOptions()
    assert plain.gc.options() == GcOptions()
    assert (plain.checkpoints.expiry_dry_run, plain.gc.dry_run, plain.gc.interval_hours) == (False, False, 6)
    assert (plain.compaction.executor, plain.compaction.full, plain.tag_policy) == ("local", False, None)


def test_flat_fields_of_earlier_versions_still_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "databases:\n  - {name: a, store_url: 'memory://x', path: p, checkpoint_expiry_dry_run: true,"
        " compaction_l0_threshold: 2}\n",
    )
    (db,) = load_config(str(path)).databases
    assert (db.checkpoints.expiry_dry_run, db.compaction.l0_threshold) == (True, 2)
    both = write(
        tmp_path,
        "databases:\n  - {name: a, store_url: 'memory://x', path: p, compaction_l0_threshold: 2,"
        " compaction: {l0_threshold: 3}}\n",
        "both.yaml",
    )
    with pytest.raises(ConfigError, match=r"compaction_l0_threshold and compaction\.l0_threshold both set"):
        load_config(str(both))


@pytest.mark.parametrize(
    ("entry", "field", "detail"),
    [
        ("gc: {wal_min_age: 30s}", "databases.0.gc", "below the floor"),
        ("gc: {interval_hours: 0}", "databases.0.gc.interval_hours", "greater than or equal to 1"),
        ("gc: {manifest_min_age: soon}", "databases.0.gc.manifest_min_age", "cannot parse duration"),
        ("checkpoints: {reader_lifetime: 15s}", "databases.0.checkpoints", "must exceed twice"),
        ("compaction: {executor: ray}", "databases.0.compaction.executor", "'local' or 'spark'"),
        (
            "compaction: {l0_threshold: 1}",
            "databases.0.compaction.l0_threshold",
            "greater than or equal to 2",
        ),
        ("gc: {min_age: 5min}", "databases.0.gc.min_age", "not permitted"),
    ],
)
def test_invalid_policy_names_the_field(tmp_path: Path, entry: str, field: str, detail: str) -> None:
    path = write(tmp_path, f"databases:\n  - name: a\n    store_url: memory://x\n    path: p\n    {entry}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    assert f"{field}:" in str(raised.value) and detail in str(raised.value)


def test_credentials_in_the_file_are_refused_without_echoing_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LEAKED", "TOPSECRET")
    path = write(
        tmp_path,
        "databases:\n  - name: a\n    path: p\n"
        "    store_url: s3://b/p?endpoint_url=http://127.0.0.1:9&secret_access_key=${LEAKED}\n",
    )
    with pytest.raises(ConfigError) as raised:
        load_config(str(path))
    message = str(raised.value)
    assert "databases.0.store_url" in message and "secret_access_key" in message
    assert "SLATE_OPS_S3_SECRET_ACCESS_KEY" in message and "TOPSECRET" not in message


def test_resource_credentials_come_from_envvars_that_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config()
    for var in S3_CREDENTIAL_ENV.values():
        monkeypatch.delenv(var, raising=False)
    bare = SlateDatabasesResource.from_environment(config)
    assert (bare.s3_access_key_id, bare.s3_secret_access_key, bare.s3_session_token) == (None, None, None)
    monkeypatch.setenv("SLATE_OPS_S3_SESSION_TOKEN", "tok")
    token = SlateDatabasesResource.from_environment(config)
    assert isinstance(token.s3_session_token, dg.EnvVar)
    assert token.s3_session_token == "SLATE_OPS_S3_SESSION_TOKEN"  # the name, not the value
    assert token.with_clock(ManualRuntime(0.0)).s3_session_token == "SLATE_OPS_S3_SESSION_TOKEN"
