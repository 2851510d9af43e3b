"""The layout (slate_ops.layout): its key builders and parsers round-trip, every key is matched in
full (a database nested under another's directory, or an object of no database, is never taken for
one of the database's own objects), discovery finds exactly the live databases of a listing, and no
other module spells an object key."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from slate_ops import admin
from slate_ops.admin.fleet import discover_databases
from slate_ops.compaction.state import CompactionsStore
from slate_ops.engine.wal_store import WalStore
from slate_ops.errors import InvalidDatabaseNameError
from slate_ops.layout import (
    BOUNDARY_NAMESPACES,
    OWN_DIRECTORIES,
    boundary_key,
    compactions_key,
    deleted_marker_key,
    discovery_prefix,
    live_databases,
    manifest_key,
    own_directory,
    parse_boundary_key,
    parse_compactions_key,
    parse_deleted_marker_key,
    parse_manifest_key,
    parse_own_manifest_key,
    parse_sst_key,
    parse_wal_key,
    sst_key,
    wal_key,
)
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import MemoryStore

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
    assert [parse_boundary_key(path, boundary_key(path, n)) for n in BOUNDARY_NAMESPACES] == [
        "manifest",
        "compactions",
    ]


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
        f"{inner}/gc/manifest.boundary",
    ]
    for key in keys:
        assert parse_boundary_key(path, key) is None
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


# --- any database path and id round-trip; nested databases stay apart --------------------------------

IDS = st.integers(min_value=0, max_value=2**64 - 1)
ULIDS = st.builds(lambda n: ULID.from_int(n), st.integers(min_value=0, max_value=2**128 - 1))
COMPONENTS = st.one_of(
    st.sampled_from(["a", "db", "team", "wal_db", "walx", "manifests", "gcs", "é", "a b", "0", "x.y", "-"]),
    st.text(st.characters(codec="utf-8", exclude_characters="/\\\x7f"), min_size=1, max_size=12),
).filter(lambda c: c.isprintable() and c not in (".", "..") and c.lower() not in OWN_DIRECTORIES)
DB_PATHS = st.lists(COMPONENTS, max_size=4).map("/".join).filter(lambda p: len(p.encode()) <= 200)


@settings(max_examples=300, deadline=None)
@given(DB_PATHS, IDS, ULIDS)
def test_any_database_path_and_id_round_trip_through_every_builder(
    path: str, object_id: int, sst: ULID
) -> None:
    assert parse_manifest_key(manifest_key(path, object_id)) == (path, object_id)
    assert parse_own_manifest_key(path, manifest_key(path, object_id)) == object_id
    assert parse_compactions_key(path, compactions_key(path, object_id)) == object_id
    assert parse_wal_key(path, wal_key(path, object_id)) == object_id
    assert parse_sst_key(path, sst_key(path, sst)) == sst
    assert parse_deleted_marker_key(deleted_marker_key(path, object_id)) == (path, object_id)
    for namespace in BOUNDARY_NAMESPACES:
        assert parse_boundary_key(path, boundary_key(path, namespace)) == namespace
    for directory in OWN_DIRECTORIES:
        assert own_directory(path, directory) == (f"{path}/{directory}/" if path else f"{directory}/")
    # A key of one kind is never another kind's.
    assert parse_wal_key(path, manifest_key(path, object_id)) is None
    assert parse_own_manifest_key(path, compactions_key(path, object_id)) is None
    assert parse_manifest_key(wal_key(path, object_id)) is None


@settings(max_examples=300, deadline=None)
@given(DB_PATHS, DB_PATHS.filter(bool), st.sampled_from(OWN_DIRECTORIES), IDS, ULIDS)
def test_a_database_nested_under_another_is_never_parsed_as_the_outer_one(
    outer: str, rest: str, directory: str, object_id: int, sst: ULID
) -> None:
    """Inside the outer database's own directory (a path no database may have: planted, or a foreign
    copy) or below it under an ordinary name, the inner database's keys are never the outer's."""
    legal = f"{outer}/{rest}" if outer else rest
    hostile = f"{outer}/{directory}/{rest}" if outer else f"{directory}/{rest}"
    for inner in (legal, hostile):
        keys = [
            f"{inner}/manifest/{object_id:020d}.manifest",
            f"{inner}/compactions/{object_id:020d}.compactions",
            f"{inner}/wal/{object_id:020d}.sst",
            f"{inner}/compacted/{sst}.sst",
            f"{inner}/gc/deleted.{object_id:020d}",
            f"{inner}/gc/manifest.boundary",
        ]
        for key in keys:
            assert parse_own_manifest_key(outer, key) is None
            assert parse_compactions_key(outer, key) is None
            assert parse_wal_key(outer, key) is None
            assert parse_sst_key(outer, key) is None
            assert parse_boundary_key(outer, key) is None
            assert (parse_manifest_key(key) or (inner,))[0] == inner
            assert (parse_deleted_marker_key(key) or (inner,))[0] == inner
    assert parse_manifest_key(f"{hostile}/manifest/{object_id:020d}.manifest") is None
    assert live_databases([f"{hostile}/manifest/{object_id:020d}.manifest"]) == {}


# --- discovery ---------------------------------------------------------------------------------------

STRAY_MARKER = ("x", 9)
"""A deletion marker among the hostile keys: path ``x`` is deleted through manifest 9 even if a test
draws a database there."""
HOSTILE_KEYS = [
    "README",
    "manifest/1.manifest",  # not 20 digits
    f"a/manifest/{1:020d}.manifest.bak",
    f"a/manifest/{1:020d}.manifest/x",
    f"a/wal/manifest/{1:020d}.manifest",  # a database inside a's WAL directory: no database
    f"WAL/manifest/{1:020d}.manifest",  # reserved in any case
    f"a/../manifest/{1:020d}.manifest",
    f"a\\b/manifest/{1:020d}.manifest",
    f"/manifest/{1:020d}.manifest",
    f"a//b/manifest/{1:020d}.manifest",
    f"{STRAY_MARKER[0]}/gc/deleted.{STRAY_MARKER[1]:020d}",  # a marker with no database (unless drawn)
    f"a/gc/deleted.{1:020d}.tmp",
    f"a/manifest/{chr(0x661) * 20}.manifest",  # Arabic-Indic digits: str.isdigit, not an id
]


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(DB_PATHS, st.lists(st.integers(1, 50), min_size=1, max_size=4), max_size=6),
    st.data(),
)
def test_live_databases_finds_exactly_the_live_ones_of_any_listing(
    manifests: dict[str, list[int]], data: st.DataObject
) -> None:
    keys = list(HOSTILE_KEYS)
    expected: dict[str, int] = {}
    for path, ids in manifests.items():
        keys += [manifest_key(path, i) for i in ids]
        keys.append(own_directory(path, "wal") + f"{max(ids):020d}.sst")
        deleted_at = data.draw(st.one_of(st.none(), st.sampled_from(ids)), label=f"tombstone of {path!r}")
        if deleted_at is not None:
            keys.append(deleted_marker_key(path, deleted_at))
        if path == STRAY_MARKER[0]:  # the hostile keys' marker deletes it too
            deleted_at = max(deleted_at or 0, STRAY_MARKER[1])
        if deleted_at is None or max(ids) > deleted_at:
            expected[path] = max(ids)
    random.Random(data.draw(st.integers(0, 2**32))).shuffle(keys)
    found = live_databases(keys)
    assert found == expected and list(found) == sorted(expected)


def test_discovery_prefix_is_a_database_path() -> None:
    assert discovery_prefix("") == discovery_prefix("/") == ""
    assert discovery_prefix("team") == discovery_prefix("team/") == discovery_prefix("/team//") == "team/"
    for refused in ("..", "a/wal", "a\\b"):
        with pytest.raises(InvalidDatabaseNameError):
            discovery_prefix(refused)


def test_every_listing_finds_the_database_at_the_prefix_and_below_it_only() -> None:
    """``list-dbs`` and discovery (Dagster's ``discover:``, reference checks) share one rule."""
    store = MemoryStore()
    for path in ("", "team", "team/a", "team/a/b", "team2", "teams/x"):
        admin.create_db(path, store)
    admin.create_db("gone", store)
    admin.destroy("gone", store, soft=False, dry_run=False)
    cases = {
        "": ["", "team", "team/a", "team/a/b", "team2", "teams/x"],
        "team": ["team", "team/a", "team/a/b"],
        "team/": ["team", "team/a", "team/a/b"],
        "team/a": ["team/a", "team/a/b"],
        "gone": [],
        "nothing": [],
    }
    for prefix, expected in cases.items():
        assert discover_databases(store, prefix) == expected, prefix
        assert [d.path for d in admin.list_dbs(prefix, store)] == expected, prefix


def test_the_stores_use_the_layouts_keys() -> None:
    store = MemoryStore()
    manifests = ManifestStore(store, "a/b").sequence
    compactions = CompactionsStore(store, "a/b").sequence
    assert manifests.key(5) == manifest_key("a/b", 5) and manifests.parse_id(manifest_key("a/b", 5)) == 5
    assert compactions.key(5) == compactions_key("a/b", 5)
    assert compactions.parse_id(compactions_key("a/b/c", 5)) is None
    assert manifests.boundary.key == boundary_key("a/b", "manifest")
    assert compactions.boundary.key == boundary_key("a/b", "compactions")
    assert WalStore(store, "/a/b/").key(5) == wal_key("a/b", 5)


# --- no module but layout.py spells an object key ----------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
KEY_FRAGMENT = re.compile(
    r"(^|/)(manifest|wal|compacted|compactions|gc)/"  # a directory of a database, as a key component
    r"|\.(manifest|compactions|boundary|sst)\$?$"  # a suffix (or a regex's), ending the text
    r"|(^|/)deleted\."  # a deletion marker
)
"""What a string constant that builds or matches an object key contains. Text with whitespace (a
message, a docstring) is not a key; ``<db>/`` and ``.sst`` inside a message are never flagged."""
NAMED_CONSTANT = re.compile(r"(_DIR|_DIRS|_DIRECTORIES|_SUFFIX|_MARKER|_DIGITS)$")
LAYOUT_NAMES = {"manifest", "wal", "compacted", "compactions", "gc", "sst", "boundary", "deleted", 20}
"""The values of the layout's names: a constant named like one and holding one redefines it."""


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _key_literals(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value.replace("\\", "")
            if not any(c.isspace() for c in text) and KEY_FRAGMENT.search(text):
                found.append(f"{name}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = [t.id for t in targets if isinstance(t, ast.Name) and NAMED_CONSTANT.search(t.id)]
            values = node.value.elts if isinstance(node.value, ast.Tuple | ast.List) else [node.value]
            spelled = any(isinstance(v, ast.Constant) and v.value in LAYOUT_NAMES for v in values)
            if named and spelled:
                found.append(f"{name}:{node.lineno}: {', '.join(named)} defined outside layout.py")
    return found


def test_the_scan_finds_keys_spelled_out() -> None:
    """The check below would catch each way a key was spelled out before layout.py owned them."""
    spelled = [
        '_WAL_NAME = re.compile(r"^(\\d{20})\\.sst$")',
        'BOUNDARY_FILES = ("gc/manifest.boundary", "gc/compactions.boundary")',
        'prefix = f"{db.db_path}/wal/"',
        'key = f"{base}/compacted/{view.sst_id}.sst"',
        'name.endswith(".manifest")',
        'COMPACTIONS_SUFFIX = "compactions"',
        'MANIFEST_DIR = "manifest"',
        "ID_DIGITS = 20",
        'OWN_DIRECTORIES = ("manifest", "wal")',
        'marker = f"{path}/gc/deleted.{tombstone:020d}"',
    ]
    for line in spelled:
        assert _key_literals(line, "example"), line
    allowed = [
        'raise CorruptObjectError(key, f"overwrite {key} with the id of the newest .compactions file")',
        '"""<db>/wal/<id>.sst objects in id order."""',
        'resource = "manifest"',
        'name = "team/a.b"',
        '_LOCK_DIR = ".slate-ops-locks"',
    ]
    for line in allowed:
        assert not _key_literals(line, "example"), line


def test_no_module_but_layout_spells_an_object_key() -> None:
    found = []
    for module in sorted((ROOT / "slate_ops").rglob("*.py")):
        name = module.relative_to(ROOT).as_posix()
        if name != "slate_ops/layout.py" and "/_generated/" not in name:
            found += _key_literals(module.read_text(), name)
    assert not found, "build and parse object keys with slate_ops.layout:\n" + "\n".join(found)
