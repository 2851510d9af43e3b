"""The databases config file: defaults, environment, and errors that name the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from slate_ops.errors import ConfigError
from slate_ops.orchestration.config import load_config


def write(tmp_path: Path, text: str, name: str = "databases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_embedded_default_is_one_demo_database_under_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SLATE_OPS_STORE")
    monkeypatch.chdir(tmp_path)
    config = load_config()
    assert [(db.name, db.path) for db in config.databases] == [("demo", "demo")]
    assert config.databases[0].store_url == (tmp_path / ".slate").as_uri()
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
    assert (orders.path, orders.checkpoint_expiry_dry_run, orders.description) == (
        "tenants/orders",
        True,
        "Orders",
    )
    # An entry without store_url gets $SLATE_OPS_STORE (set by the autouse fixture).
    assert users.store_url.startswith("file:///") and users.checkpoint_expiry_dry_run is False


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
