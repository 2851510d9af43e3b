"""Hypothesis strategies for the whole manifest model (tests of the codec and of its fast builder)."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st
from ulid import ULID

from slate_ops.manifest.model import (
    Checkpoint,
    CompactedSst,
    ExternalDb,
    KeyRange,
    Manifest,
    SortedRun,
    SstInfo,
    SstView,
    WriterCheckpoint,
)

U64 = st.integers(0, 2**64 - 1)
U32 = st.integers(0, 2**32 - 1)
ulids = st.one_of(
    st.binary(min_size=16, max_size=16).map(ULID),
    st.sampled_from([ULID(bytes(16)), ULID(b"\xff" * 16)]),
)
uuids = st.one_of(st.uuids(), st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i)))
keys = st.one_of(st.just(b""), st.binary(max_size=48))
key_ranges = st.builds(KeyRange, st.none() | keys, st.none() | keys)
texts = st.text(max_size=24)  # any unicode except surrogates, incl. "" and NUL

sst_infos = st.builds(SstInfo, keys, keys, U64, U64, U64, U64, U32)
compacted_ssts = st.builds(CompactedSst, ulids, sst_infos, st.none() | ulids)
views = st.builds(SstView, ulids, ulids, st.none() | key_ranges)
sorted_runs = st.builds(SortedRun, U32, st.lists(views, max_size=4).map(tuple))
external_dbs = st.builds(ExternalDb, texts, uuids, uuids, st.lists(ulids, max_size=4).map(tuple))
checkpoints = st.builds(
    Checkpoint,
    id=uuids,
    manifest_id=U64,
    create_time_s=U64,
    expire_time_s=st.none() | U64,
    metadata=st.none() | st.builds(WriterCheckpoint, U64),
    name=st.none() | texts,
)
manifests = st.builds(
    Manifest,
    initialized=st.booleans(),
    destroyed_at_s=st.none() | U64,
    writer_epoch=U64,
    compactor_epoch=U64,
    replay_after_wal_id=U64,
    wal_id_last_seen=U64,
    next_wal_sst_id=U64,
    last_l0_seq=U64,
    l0_last_compacted=st.none() | ulids,
    external_dbs=st.lists(external_dbs, max_size=3).map(tuple),
    ssts=st.lists(compacted_ssts, max_size=6).map(tuple),
    l0=st.lists(views, max_size=6).map(tuple),
    compacted=st.lists(sorted_runs, max_size=3).map(tuple),
    checkpoints=st.lists(checkpoints, max_size=3).map(tuple),
    visible_range=st.none() | key_ranges,
    deleted_at_s=st.none() | U64,
)
