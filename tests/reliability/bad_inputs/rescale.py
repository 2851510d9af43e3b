"""Group 4, split and merge: key order, target paths, overlapping or non-neighbouring sources, missing
sources, writes only in the WAL."""

from __future__ import annotations

from collections.abc import Callable

from slate_ops import Db, admin
from slate_ops.engine.wal_chain import is_data
from slate_ops.errors import (
    CloneMismatchError,
    DbNotFoundError,
    InvalidArgumentError,
    NonAdjacentSourcesError,
    OverlappingSourcesError,
    WalNotFlushedError,
)
from tests.reliability.bad_inputs.catalogue import BYTES_FIX, QUIET, Env, case, cli
from tests.reliability.bad_inputs.states import build, nested_db, unflushed, with_shards, with_two_overlapping

group = "split and merge"
ORDER_FIX = "Sort the keys"


def split(keys: list[bytes], into: list[str], source: str = "db") -> Callable[[Env], object]:
    return lambda env: admin.split(source, env.store, keys, into)


case(
    group,
    "split keys out of order",
    nested_db,
    split([b"k05", b"k02"], ["a", "b", "c"]),
    InvalidArgumentError,
    "k05 >= k02",
    "{location}",
    ORDER_FIX,
)
case(
    group,
    "split keys duplicated",
    nested_db,
    split([b"k05", b"k05"], ["a", "b", "c"]),
    InvalidArgumentError,
    "{location}",
    ORDER_FIX,
)
case(
    group,
    "split key beyond the shard's range",
    with_shards,
    split([b"k07"], ["a", "b"], "s0"),
    InvalidArgumentError,
    "split key k07 ",
    "s0",
    "non-empty range",
)
case(
    group,
    "split key at the shard's start",
    with_shards,
    split([b"k05"], ["a", "b"], "s1"),
    InvalidArgumentError,
    "split key k05 ",
    "s1",
    "non-empty range",
)
case(group, "split without keys", build, split([], ["a"]), InvalidArgumentError, "at least one split key")
case(
    group,
    "split with too many paths",
    build,
    split([b"k05"], ["a", "b", "c"]),
    InvalidArgumentError,
    "pass one more path than keys",
)
case(
    group,
    "split into the source's path",
    build,
    split([b"k05"], ["db", "b"]),
    InvalidArgumentError,
    "'db' is the source",
)
case(
    group,
    "split into nested paths",
    build,
    split([b"k05"], ["a", "a/b"]),
    InvalidArgumentError,
    "'a/b' is inside 'a'",
)
case(group, "split key of the wrong type", build, split(["k05"], ["a", "b"]), InvalidArgumentError, BYTES_FIX)  # type: ignore[list-item]


def _target_taken(env: Env) -> None:
    build(env)
    build(env, "a", rounds=1)


case(
    group,
    "split onto an existing database",
    _target_taken,
    split([b"k05"], ["a", "b"]),
    CloneMismatchError,
    "'a'",
    "destroy it or choose another target path",
)
case(
    group,
    "split with writes only in the WAL",
    unflushed,
    split([b"k05"], ["a", "b"]),
    WalNotFlushedError,
    "{wal}",
    "flush",
)
case(
    group,
    "CLI split with writes only in the WAL",
    unflushed,
    cli("--path", "db", "split", "--at", "k05", "--into", "a", "--into", "b"),
    1,
    "{wal}",
    "flush",
)
case(
    group,
    "CLI split keys out of order",
    build,
    cli("--path", "db", "split", "--at", "k05", "--at", "k01", "--into", "a", "--into", "b", "--into", "c"),
    1,
    ORDER_FIX,
)


def merge(sources: list[str], target: str = "m") -> Callable[[Env], object]:
    return lambda env: admin.merge(sources, env.store, target)


case(
    group,
    "merge overlapping sources",
    with_two_overlapping,
    merge(["db", "other"]),
    OverlappingSourcesError,
    "'db'",
    "'other'",
    "disjoint key ranges",
)
case(
    group,
    "CLI merge overlapping sources",
    with_two_overlapping,
    cli("--path", "m", "merge", "--source", "db", "--source", "other"),
    1,
    "'db'",
    "'other'",
    "disjoint",
)
case(
    group,
    "merge shards that are not neighbours",
    with_shards,
    merge(["s0", "s11"]),
    NonAdjacentSourcesError,
    "'s0'",
    "'s11'",
    "neighbouring shards",
)


def _unflushed_shard(env: Env) -> None:
    with_shards(env)
    with Db.open("s0", env.store, QUIET) as shard:
        shard.put(b"k01", b"wal only")
        shard.flush()
    env.vars["wal"] = [m.key for m in env.store.list("s0/wal/") if is_data(m.size)][-1]


case(
    group,
    "merge a source with writes only in the WAL",
    _unflushed_shard,
    merge(["s0", "s1"]),
    WalNotFlushedError,
    "{wal}",
    "flush",
)
case(group, "merge a missing source", build, merge(["db", "nope"]), DbNotFoundError, "nope", "create-db")
case(
    group,
    "merge missing sources onto an existing database",
    build,
    merge(["nope1", "nope2"], "db"),
    DbNotFoundError,
    "nope1",
    "create-db",
)
case(
    group,
    "CLI merge missing sources onto an existing database",
    build,
    cli("--path", "db", "merge", "--source", "nope1", "--source", "nope2"),
    1,
    "nope1",
    "create-db",
)
case(
    group,
    "merge into a source's path",
    with_shards,
    merge(["s0", "s1"], "s0"),
    InvalidArgumentError,
    "'s0' is a source",
)
case(group, "merge the same source twice", with_shards, merge(["s0", "s0"]), InvalidArgumentError, "distinct")
