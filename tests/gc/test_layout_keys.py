"""The layout's key builders and parsers (slate_ops.layout): every key is matched in full, so a
database nested under another's directory, or an object of no database, is never taken for one of
the database's own objects."""

from __future__ import annotations

import pytest
from ulid import ULID

from slate_ops.layout import (
    compactions_key,
    deleted_marker_key,
    manifest_key,
    parse_compactions_key,
    parse_deleted_marker_key,
    parse_manifest_key,
    parse_own_manifest_key,
    parse_sst_key,
    parse_wal_key,
    sst_key,
    wal_key,
)

PATHS = ["", "a", "x/y/a"]


@pytest.mark.parametrize("path", PATHS)
def test_every_builder_round_trips_through_its_parser(path: str) -> None:
    sst = ULID()
    assert parse_manifest_key(manifest_key(path, 7)) == (path, 7)
    assert parse_own_manifest_key(path, manifest_key(path, 7)) == 7
    assert parse_wal_key(path, wal_key(path, 9)) == 9
    assert parse_sst_key(path, sst_key(path, sst)) == sst
    assert parse_compactions_key(path, compactions_key(path, 3)) == 3
    assert parse_deleted_marker_key(deleted_marker_key(path, 12)) == (path, 12)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", ["wal", "manifest", "compacted", "compactions", "gc"])
def test_keys_of_a_database_nested_in_a_reserved_directory_are_not_the_outer_ones(
    path: str, name: str
) -> None:
    inner = f"{path}/{name}" if path else name  # a database no one may create today, or a foreign copy
    sst = ULID()
    keys = [
        f"{inner}/manifest/{7:020d}.manifest",
        f"{inner}/wal/{9:020d}.sst",
        f"{inner}/compacted/{sst}.sst",
        f"{inner}/compactions/{3:020d}.compactions",
        f"{inner}/gc/deleted.{12:020d}",
    ]
    for key in keys:
        assert parse_own_manifest_key(path, key) is None
        assert parse_wal_key(path, key) is None
        assert parse_sst_key(path, key) is None
        assert parse_compactions_key(path, key) is None
        assert parse_manifest_key(key) is None  # no database may have a reserved component
        assert parse_deleted_marker_key(key) is None


@pytest.mark.parametrize(
    "key",
    [
        "README",
        "backups/manifest.tar",
        "manifest/1.manifest",  # not 20 digits
        "amanifest/00000000000000000001.manifest",
        "a/manifest/00000000000000000001.manifest.bak",
        "wal/00000000000000000001.sst.tmp",
        "gc/deleted.1",
        "gc/manifest.boundary",
    ],
)
def test_objects_of_no_database_parse_as_nothing(key: str) -> None:
    assert parse_manifest_key(key) is None and parse_deleted_marker_key(key) is None
    assert parse_own_manifest_key("", key) is None and parse_wal_key("", key) is None
    assert parse_sst_key("", key) is None and parse_compactions_key("", key) is None
