"""A SlateDB database in a slate_ops store: told apart from a damaged manifest by its framing, listed
with engine ``slatedb`` by ``list-dbs``, and refused (typed, naming SlateDB) by every operation of
slate_ops' own engine, which changes nothing.

The two manifests in ``data/`` were written by SlateDB 0.17.0 (its Python binding ``slatedb``): a new
database's first manifest, and one with L0 SSTs and a checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slate_ops import Db, admin
from slate_ops.cli import main
from slate_ops.errors import CorruptObjectError, SlateDbManifestError
from slate_ops.layout import manifest_key
from slate_ops.manifest.framing import frame, slatedb_manifest_version, unframe
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import ObjectStore
from tests.support.stores import snapshot

DATA = Path(__file__).parent / "data"
SLATEDB_MANIFESTS = sorted(DATA.glob("slatedb-*.manifest"))


def plant_slatedb(store: ObjectStore, path: str) -> None:
    """A SlateDB database at ``path``: its manifests 1 and 2, as SlateDB names them."""
    for manifest_id, file in enumerate(SLATEDB_MANIFESTS, start=1):
        store.put(manifest_key(path, manifest_id), file.read_bytes())


@pytest.mark.parametrize("file", SLATEDB_MANIFESTS, ids=lambda f: f.name)
def test_a_slatedb_manifest_is_named_as_such_not_corrupt(file: Path) -> None:
    data = file.read_bytes()
    assert slatedb_manifest_version(data) == 2  # SlateDB 0.17.0 writes format version 2
    with pytest.raises(SlateDbManifestError, match=r"is a SlateDB manifest .*version 2.*nothing was changed"):
        unframe(data, "db/manifest/00000000000000000001.manifest")


def test_a_damaged_slate_ops_manifest_still_reads_as_corrupt(local_dir_store: ObjectStore) -> None:
    with Db.open("db", local_dir_store) as db:
        db.put(b"k", b"v")
        db.flush_memtable()
    latest = ManifestStore(local_dir_store, "db").read_latest_required()
    data = local_dir_store.get(manifest_key("db", latest.id)).data
    assert unframe(data, "x")  # intact
    for position in range(len(data)):  # every single-byte flip: corrupt, never "a SlateDB manifest"
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        with pytest.raises(CorruptObjectError) as caught:
            unframe(bytes(damaged), "x")
        assert not isinstance(caught.value, SlateDbManifestError), position
    assert slatedb_manifest_version(frame(b"\x00" * 16)) is None
    assert slatedb_manifest_version(b"\x00\x02" + b"\xff" * 40) is None  # no FlatBuffer root inside


def test_list_dbs_shows_a_slatedb_database_beside_ours(
    local_dir_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    with Db.open("ours", local_dir_store) as db:
        db.put(b"k", b"v")
    plant_slatedb(local_dir_store, "theirs")
    listed = {d.path: d for d in admin.list_dbs("", local_dir_store)}
    assert listed["ours"].state == "live"
    assert listed["theirs"].state == "slatedb" and "SlateDB" in (listed["theirs"].error or "")
    # The CLI reads a SlateDB database through its handle (issue 21): listed with its engine.
    assert main(["--store", local_dir_store.url, "list-dbs"]) == 0
    rows = {row["path"]: row for row in json.loads(capsys.readouterr().out)}
    assert (rows["theirs"]["engine"], rows["ours"]["engine"]) == ("slatedb", "slate_ops")
    assert rows["ours"]["state"] == "live"


def test_every_operation_on_a_slatedb_database_is_refused_and_changes_nothing(
    local_dir_store: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    plant_slatedb(local_dir_store, "theirs")
    before = snapshot(local_dir_store)
    refused = [
        lambda: admin.describe_db("theirs", local_dir_store),
        lambda: admin.run_gc("theirs", local_dir_store, dry_run=True),
        lambda: admin.run_gc("theirs", local_dir_store, dry_run=False),
        lambda: admin.list_checkpoints("theirs", local_dir_store),
        lambda: Db.open("theirs", local_dir_store),
        lambda: admin.destroy("theirs", local_dir_store, soft=True, dry_run=False),
        lambda: admin.destroy("theirs", local_dir_store, soft=False, dry_run=False),
    ]
    for call in refused:
        with pytest.raises(SlateDbManifestError, match="SlateDB"):
            call()
        assert snapshot(local_dir_store) == before
    for argv in (  # the CLI with our engine forced (auto opens SlateDB's: tests/cli/test_cli_slatedb.py)
        ["describe"],
        ["gc", "--no-dry-run"],
        ["put", "k", "v"],
        ["destroy", "--hard", "--no-dry-run"],
    ):
        code = main(["--store", local_dir_store.url, "--engine", "slate_ops", "--path", "theirs", *argv])
        err = capsys.readouterr().err
        assert code != 0 and "SlateDB manifest" in err and "Traceback" not in err, (argv, err)
        assert snapshot(local_dir_store) == before
