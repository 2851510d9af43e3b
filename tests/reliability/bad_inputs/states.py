"""Store states the cases start from (setups), where their objects are, and how to damage them."""

from __future__ import annotations

import struct
import time
import uuid
import zlib
from collections.abc import Callable
from typing import Any

from slate_ops import Db, DbReader, admin
from slate_ops.compaction import Compactor
from slate_ops.config import CheckpointOptions
from slate_ops.engine.wal_chain import is_data
from slate_ops.manifest.model import Manifest
from slate_ops.manifest.store import ManifestStore
from slate_ops.runtime import ManualRuntime
from slate_ops.sst.format import TRAILER_LEN
from tests.reliability.bad_inputs.catalogue import QUIET, QUIET_READER, Env, Setup


def nothing(env: Env) -> None:
    del env


def build(env: Env, path: str = "db", *, rounds: int = 2, wal_tail: bool = False) -> None:
    """``rounds`` L0 SSTs holding ``k00``..``k09``; ``wal_tail``: then ``w1`` durable only in the WAL."""
    with Db.open(path, env.store, QUIET) as db:
        for round_ in range(rounds):
            for i in range(10):
                db.put(b"k%02d" % i, b"v%d" % round_)
            db.flush()
            db.flush_memtable()
        if wal_tail:
            db.put(b"w1", b"wal only")
            db.flush()


def latest_manifest(env: Env, path: str = "db") -> Manifest:
    return ManifestStore(env.store, path).read_latest_required().value


def manifest_key(env: Env, path: str = "db") -> str:
    current = ManifestStore(env.store, path).read_latest_required()
    return ManifestStore(env.store, path).sequence.key(current.id)


def newest_l0_key(env: Env) -> str:
    view = latest_manifest(env).l0[0]
    return f"db/compacted/{view.sst_id}.sst"


def sorted_run_key(env: Env) -> str:
    view = latest_manifest(env).compacted[0].views[0]
    return f"db/compacted/{view.sst_id}.sst"


def wal_data_key(env: Env) -> str:
    return [m.key for m in env.store.list("db/wal/") if is_data(m.size)][-1]


def compactions_key(env: Env) -> str:
    return [m.key for m in env.store.list("db/compactions/")][-1]


Damage = Callable[[bytes], bytes]


def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0xFF
    return bytes(out)


def manifest_v7(data: bytes) -> bytes:
    """An intact manifest file of format version 7 (the framing never changes: u16 version, CRC)."""
    body = struct.pack("<H", 7) + data[2:-4]
    return body + struct.pack("<I", zlib.crc32(body))


def sst_v2(data: bytes) -> bytes:
    """An intact SST of format version 2: the trailer's version and the footer checksum rewritten."""
    footer_len = struct.unpack_from("<I", data, len(data) - TRAILER_LEN)[0]
    start = len(data) - TRAILER_LEN - footer_len
    out = bytearray(data)
    struct.pack_into("<H", out, len(data) - TRAILER_LEN + 4, 2)
    struct.pack_into("<I", out, len(data) - 12, zlib.crc32(bytes(out[start : len(data) - 12])))
    return bytes(out)


def damaged(
    locate: Callable[[Env], str], damage: Damage, *, before: Setup | None = None, **build_args: Any
) -> Setup:
    """Build the database (``before`` instead, if given), then damage the object ``locate`` finds;
    its key is ``{damaged}``."""

    def setup(env: Env) -> None:
        (before or (lambda e: build(e, **build_args)))(env)
        key = locate(env)
        env.store.put(key, damage(env.store.get(key).data))
        env.vars["damaged"] = key

    return setup


def compacted_once(env: Env) -> None:
    build(env, rounds=4)
    compactor = Compactor("db", env.store)
    report = compactor.run_once(full=True)
    compactor.close()  # its "completed" record is written in the background: durable before any damage
    assert report is not None


def with_compactions(content: bytes) -> Setup:
    def setup(env: Env) -> None:
        compacted_once(env)
        key = compactions_key(env)
        env.store.put(key, content)
        env.vars["damaged"] = key

    return setup


def with_boundary(namespace: str, content: bytes) -> Setup:
    def setup(env: Env) -> None:
        build(env)
        key = env.vars["boundary"] = f"db/gc/{namespace}.boundary"
        env.store.put(key, content)
        time.sleep(0.01)  # older than the 1 ms minimum age of the GC cases

    return setup


def with_checkpoints(env: Env) -> None:
    """A database, plus ``{unknown}`` (an id no checkpoint has) and ``{expired}`` (one that expired)."""
    build(env)
    env.vars["unknown"] = str(uuid.uuid4())
    an_hour_ago = ManualRuntime(time.time() - 3600)
    expired = admin.create_checkpoint("db", env.store, CheckpointOptions(lifetime="10s"), clock=an_hour_ago)
    env.vars["expired"] = str(expired.id)


def with_open_db(env: Env) -> None:
    build(env)
    db = Db.open("db", env.store, QUIET)
    env.objects["db"] = db
    env.cleanup.append(db.close)


def with_open_reader(env: Env) -> None:
    build(env)
    reader = DbReader.open("db", env.store, options=QUIET_READER)
    env.objects["reader"] = reader
    env.cleanup.append(reader.close)


def with_shards(env: Env) -> None:
    """``db`` split at ``k05`` into ``s0`` [-inf, k05) and ``s1`` [k05, +inf); ``s1`` split at k08."""
    build(env)
    admin.split("db", env.store, [b"k05"], ["s0", "s1"])
    admin.split("s1", env.store, [b"k08"], ["s10", "s11"])


def with_two_overlapping(env: Env) -> None:
    build(env)
    build(env, "other", rounds=1)


def unflushed(env: Env) -> None:
    build(env, wal_tail=True)
    env.vars["wal"] = wal_data_key(env)


def nested_db(env: Env) -> None:
    build(env)
    env.vars["location"] = f"{env.store.url}/db"


def shard_db(env: Env) -> None:
    """``with_shards``, and a writer open on ``s0`` (``db(env)``); ``{location}`` is the shard's URL."""
    with_shards(env)
    shard = Db.open("s0", env.store, QUIET)
    env.objects["db"] = shard
    env.cleanup.append(shard.close)
    env.vars["location"] = f"{env.store.url}/s0"
