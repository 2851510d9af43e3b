"""Engine detection on real manifest bytes from both engines (slate_ops.engines.detect)."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

import pytest

from slate_ops import admin
from slate_ops.engines.detect import Engine, detect_manifest
from slate_ops.errors import CorruptObjectError
from slate_ops.objstore import LocalStore

DATA = Path(__file__).parent / "data"
# Written by slatedb==0.17.0 (DbBuilder + two memtable flushes; the second file after a checkpoint).
SLATEDB_FILES = sorted(DATA.glob("slatedb-0.17.0-*.manifest"))


def ours(tmp_path: Path) -> list[bytes]:
    store = LocalStore(tmp_path)
    admin.create_db("db", store)
    admin.create_checkpoint("db", store)
    files = sorted((tmp_path / "db" / "manifest").glob("*.manifest"))
    assert len(files) >= 2
    return [f.read_bytes() for f in files]


def test_slate_ops_manifests_are_ours(tmp_path: Path) -> None:
    for data in ours(tmp_path):
        d = detect_manifest(data)
        assert (d.engine, d.format_version, d.supported) == (Engine.SLATE_OPS, 1, True)


@pytest.mark.parametrize("path", SLATEDB_FILES, ids=lambda p: p.name)
def test_stored_slatedb_manifests_are_slatedb(path: Path) -> None:
    d = detect_manifest(path.read_bytes(), str(path))
    assert (d.engine, d.format_version, d.supported) == (Engine.SLATEDB, 2, True)
    assert d.supported_versions == (1, 2)


def test_fresh_slatedb_manifests_are_slatedb(tmp_path: Path) -> None:
    sdb = pytest.importorskip("slatedb.uniffi")

    async def write() -> None:
        b = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.LOCAL)
        b.with_config("local_path", str(tmp_path))
        db = await sdb.DbBuilder("db", b.build()).build()
        await db.put(b"k", b"v")
        await db.flush_with_options(sdb.FlushOptions(flush_type=sdb.FlushType.MEM_TABLE))
        await db.shutdown()

    asyncio.run(write())
    files = sorted((tmp_path / "db" / "manifest").glob("*.manifest"))
    assert files
    for f in files:
        assert detect_manifest(f.read_bytes()).engine is Engine.SLATEDB


def test_a_newer_version_of_either_is_detected_but_unsupported(tmp_path: Path) -> None:
    body = struct.pack("<H", 2) + ours(tmp_path)[0][2:-4]
    d = detect_manifest(body + struct.pack("<I", zlib.crc32(body)))
    assert (d.engine, d.format_version, d.supported) == (Engine.SLATE_OPS, 2, False)
    theirs = SLATEDB_FILES[0].read_bytes()
    d = detect_manifest(struct.pack(">H", 3) + theirs[2:])
    assert (d.engine, d.format_version, d.supported) == (Engine.SLATEDB, 3, False)


def test_damaged_or_foreign_bytes_are_corrupt(tmp_path: Path) -> None:
    mine = ours(tmp_path)[-1]
    flipped = bytearray(mine)
    flipped[len(mine) // 2] ^= 0xFF
    theirs = SLATEDB_FILES[-1].read_bytes()
    for bad in (b"", b"\x00", b"{}", bytes(flipped), mine[:-1], theirs[:5], b"\x00\x00" + theirs[2:]):
        with pytest.raises(CorruptObjectError, match="neither a slate_ops manifest"):
            detect_manifest(bad, "db/manifest/x.manifest")


def test_probe_finds_both_kinds_in_one_store(tmp_path: Path) -> None:
    from slate_ops.engines.probe import probe_db
    from slate_ops.errors import DbNotFoundError
    from slate_ops.objstore.wrappers import CountingStore

    store = CountingStore(LocalStore(tmp_path))
    admin.create_db("ours", store)
    theirs = tmp_path / "theirs" / "manifest"
    theirs.mkdir(parents=True)
    for i, f in enumerate(SLATEDB_FILES, start=1):
        (theirs / f"{i:020d}.manifest").write_bytes(f.read_bytes())
    store.reset()
    p = probe_db("theirs", store)
    assert (p.detection.engine, p.manifest_id) == (Engine.SLATEDB, len(SLATEDB_FILES))
    assert store.counts["list"] == 1 and store.counts["get"] == 1 and store.total == 2
    assert probe_db("ours", store).detection.engine is Engine.SLATE_OPS
    with pytest.raises(DbNotFoundError, match="missing"):
        probe_db("missing", store)
