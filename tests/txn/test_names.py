"""Database names (issue 19, item 5; docs/design/names.md): a path any of whose components is a
directory name the layout reserves is refused everywhere, with a typed error naming the rule and the
component; hostile names are refused or normalised as documented; the root database stays allowed.

On main before the fix a database named ``a/wal`` was accepted, and its objects landed in database
``a``'s WAL directory (``a``'s writer and readers then failed on ``a/wal/<id>.sst``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slate_ops import Db, DbReader, admin
from slate_ops.admin.fleet import discover_databases
from slate_ops.cli import main
from slate_ops.errors import ConfigError, InvalidArgumentError, InvalidDatabaseNameError
from slate_ops.layout import (
    MANIFEST_DIR,
    MAX_COMPONENT_BYTES,
    MAX_PATH_BYTES,
    OWN_DIRECTORIES,
    RESERVED_DIRECTORIES,
    is_valid_db_path,
    manifest_key,
    normalize_db_path,
    parse_manifest_key,
    parse_wal_key,
    wal_key,
)
from slate_ops.objstore import MemoryStore, open_store
from slate_ops.orchestration.config import parse_config
from slate_ops.orchestration.rescale import NewDatabaseConfig
from tests.support.stores import snapshot

# Every reserved name at every depth: alone, as the first, a middle and the last component.
RESERVED_PATHS = [
    shape.format(name)
    for name in sorted(RESERVED_DIRECTORIES)
    for shape in ("{}", "{}/x", "a/{}", "a/b/{}", "a/{}/b", "/{}/")
] + ["a/WAL", "Manifest/x", "a/Gc"]


def test_the_reserved_names_are_the_layouts_directories() -> None:
    """One list: the names the layout writes under a database are exactly the ones refused."""
    assert set(OWN_DIRECTORIES) == RESERVED_DIRECTORIES and MANIFEST_DIR in RESERVED_DIRECTORIES


@pytest.mark.parametrize("path", RESERVED_PATHS)
def test_reserved_components_are_refused_naming_the_rule_and_the_component(path: str) -> None:
    component = next(p for p in path.split("/") if p.lower() in RESERVED_DIRECTORIES)
    with pytest.raises(InvalidDatabaseNameError, match="reserved name") as refused:
        normalize_db_path(path)
    assert repr(component) in str(refused.value) and isinstance(refused.value, InvalidArgumentError)
    assert not is_valid_db_path(path)


@pytest.mark.parametrize("path", ["a/wal", "wal/x", "a/b/gc", "manifest", "compacted", "a/compactions"])
def test_every_python_entry_point_refuses_them_and_writes_nothing(path: str) -> None:
    store = MemoryStore()
    admin.create_db("a", store)
    before = snapshot(store)
    calls = [
        lambda: Db.open(path, store),
        lambda: DbReader.open(path, store),
        lambda: admin.create_db(path, store),
        lambda: admin.create_checkpoint(path, store),
        lambda: admin.describe_db(path, store),
        lambda: admin.create_clone(path, "a", store),
        lambda: admin.split("a", store, [b"m"], ["a_low", path]),
        lambda: admin.merge(["a", path], store, "ab"),
        lambda: admin.destroy(path, store, dry_run=False),
        lambda: admin.run_gc(path, store, dry_run=False),
    ]
    for call in calls:
        with pytest.raises(InvalidDatabaseNameError, match="reserved name"):
            call()
    assert snapshot(store) == before


def test_nested_and_root_databases_stay_allowed() -> None:
    store = MemoryStore()
    for path in ("", "a", "a/b", "a/b/c", "wal_db", "a/walx", "gcs/manifests", "a b/c"):
        with Db.open(path, store) as db:
            db.put(b"k", path.encode())
    for path in ("", "a", "a/b", "a/b/c", "wal_db", "a/walx", "gcs/manifests", "a b/c"):
        with DbReader.open(path, store) as reader:
            assert reader.get(b"k") == path.encode()


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("..", "must not contain"),
        ("a/../b", "must not contain"),
        ("./a", "must not contain"),
        ("a\\b", "backslash"),
        ("..\\wal", "backslash"),
        ("a\x00b", "control character"),
        ("a\nb", "control character"),
        ("a\tb", "control character"),
        ("a\u200bb", "control character"),  # zero-width space: not printable
        ("a\ud800", "control character"),  # a lone surrogate
        ("x" * (MAX_COMPONENT_BYTES + 1), "limit is 255"),
        ("é" * 128, "limit is 255"),  # 256 bytes in UTF-8
        ("/".join(["x" * 200] * 3), "limit is 512"),
    ],
)
def test_hostile_names_are_refused(path: str, words: str) -> None:
    with pytest.raises(InvalidDatabaseNameError, match=words):
        normalize_db_path(path)


@pytest.mark.parametrize(
    ("path", "normal"), [("", ""), ("/", ""), ("//", ""), ("/a/b/", "a/b"), ("a//b", "a/b"), ("é/ü", "é/ü")]
)
def test_slashes_are_normalised(path: str, normal: str) -> None:
    assert normalize_db_path(path) == normal


def test_the_longest_names_are_accepted() -> None:
    component = "x" * MAX_COMPONENT_BYTES
    assert normalize_db_path(component) == component
    path = "/".join(["y" * 127] * 4)
    assert len(path) == MAX_PATH_BYTES - 1 and normalize_db_path(path) == path


PIECES = st.sampled_from(
    ["a", "b", "/", "//", ".", "..", "\\", "\n", "é", " ", "wal", "WAL", "gc", "manifest", "compactions"]
)


@given(st.lists(PIECES, max_size=12).map("".join))
def test_any_accepted_name_has_no_reserved_component_and_round_trips(path: str) -> None:
    try:
        normal = normalize_db_path(path)
    except InvalidDatabaseNameError:
        return
    parts = normal.split("/") if normal else []
    assert all(p and p.lower() not in RESERVED_DIRECTORIES and p not in (".", "..") for p in parts)
    assert not normal.startswith("/") and not normal.endswith("/") and "\\" not in normal
    assert normalize_db_path(normal) == normal
    assert parse_manifest_key(manifest_key(normal, 7)) == (normal, 7)
    assert parse_wal_key(normal, wal_key(normal, 3)) == 3


@given(st.text(max_size=60))
def test_any_text_is_accepted_or_refused_with_the_typed_error(path: str) -> None:
    try:
        normal = normalize_db_path(path)
    except InvalidDatabaseNameError:
        return
    assert normalize_db_path(normal) == normal and is_valid_db_path(normal)


def test_discovery_skips_keys_whose_path_is_reserved() -> None:
    """Objects that look like a database under a reserved path (planted, or left by an older release)
    are not databases: listing and discovery skip them, and never fail on them."""
    store = MemoryStore()
    admin.create_db("a", store)
    admin.create_db("", store)
    for planted in ("a/wal", "wal", "a/b/gc", "compacted/x"):
        store.put(manifest_key("ok", 1).replace("ok", planted, 1), b"")
    assert [d.path for d in admin.list_dbs("", store)] == ["", "a"]
    assert discover_databases(store) == ["", "a"]


@pytest.mark.parametrize("path", ["a/wal", "wal", "a/b/gc", "..", "a\\b"])
def test_the_fleet_config_refuses_them(path: str) -> None:
    text = json.dumps({"databases": [{"name": "x", "store_url": "memory://names", "path": path}]})
    with pytest.raises(
        ConfigError, match=r"databases\.0\.path: .*(reserved name|must not contain|backslash)"
    ):
        parse_config(text)
    text = json.dumps({"discover": {"store_url": "memory://names", "prefix": path}})
    with pytest.raises(ConfigError, match=r"discover\.prefix"):
        parse_config(text)


@pytest.mark.parametrize("path", ["a/wal", "wal/x", "a/b/gc", "manifest"])
def test_the_cli_refuses_them_and_writes_nothing(
    path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = (tmp_path / "store").as_uri()
    assert main(["--store", url, "--path", "a", "create-db"]) == 0
    capsys.readouterr()
    before = snapshot(open_store(url))
    for argv in (["create-db"], ["put", "k", "v", "--create"], ["describe"], ["list-checkpoints"]):
        try:
            code = main(["--store", url, "--path", path, *argv])
        except SystemExit as exit_:  # a usage error
            code = int(exit_.code or 0)
        err = capsys.readouterr().err
        component = next(p for p in path.split("/") if p in RESERVED_DIRECTORIES)
        assert code in (1, 2) and "reserved name" in err and repr(component) in err, (argv, err)
    assert snapshot(open_store(url)) == before


def test_a_rescale_target_path_in_run_config_is_refused() -> None:
    with pytest.raises(ValueError, match="reserved name"):
        NewDatabaseConfig(name="low", path="a/wal").check()  # rescale_op checks it before reading the fleet
    NewDatabaseConfig(name="low", path="a/low").check()
