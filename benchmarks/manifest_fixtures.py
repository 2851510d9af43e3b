"""Deterministic large manifests for the codec benchmark and tests.

:func:`build_large_manifest` makes the benchmark's reference manifest: 10,000 SSTs, 2,000 of them
viewed from L0 and 8,000 across 10 sorted runs, 20-byte keys, a few checkpoints and external
databases, with some visible ranges and renamed (``original_id``) SSTs so every code path runs.
"""

from __future__ import annotations

import random
import uuid

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

_BASE_MS = 1_700_000_000_000  # ULID timestamps around Nov 2023


def _ulid(rng: random.Random, ms: int) -> ULID:
    return ULID((ms << 80 | rng.getrandbits(80)).to_bytes(16, "big"))


def _uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def build_large_manifest(
    num_ssts: int = 10_000,
    num_l0: int = 2_000,
    num_sorted_runs: int = 10,
    key_len: int = 20,
    num_checkpoints: int = 4,
    num_external_dbs: int = 3,
    seed: int = 651,
) -> Manifest:
    """A manifest viewing each of ``num_ssts`` SSTs once: ``num_l0`` from L0, the rest spread over
    ``num_sorted_runs`` runs. Every 10th view has a visible range, every 50th SST an original id."""
    rng = random.Random(seed)

    def key() -> bytes:
        return rng.randbytes(key_len)

    ssts: list[CompactedSst] = []
    for i in range(num_ssts):
        first, last = sorted((key(), key()))
        ssts.append(
            CompactedSst(
                id=_ulid(rng, _BASE_MS + i),
                info=SstInfo(
                    first_key=first,
                    last_key=last,
                    size_bytes=rng.randrange(1 << 20, 1 << 28),
                    num_entries=rng.randrange(1, 1 << 22),
                    min_seq=i * 1_000,
                    max_seq=i * 1_000 + 999,
                ),
                original_id=_ulid(rng, _BASE_MS - i) if i % 50 == 0 else None,
            )
        )

    def view(i: int, sst: CompactedSst) -> SstView:
        visible = None
        if i % 10 == 0:
            start, end = sorted((key(), key()))
            visible = KeyRange(start, end if i % 20 else None)
        return SstView(view_id=_ulid(rng, _BASE_MS + num_ssts + i), sst_id=sst.id, visible_range=visible)

    views = [view(i, sst) for i, sst in enumerate(ssts)]
    l0 = tuple(reversed(views[:num_l0]))  # newest first
    rest = views[num_l0:]
    per_run = -(-len(rest) // num_sorted_runs) if num_sorted_runs else 0
    runs = tuple(
        SortedRun(id=num_sorted_runs - r, views=tuple(rest[r * per_run : (r + 1) * per_run]))
        for r in range(num_sorted_runs)
    )

    external_dbs = tuple(
        ExternalDb(
            path=f"clones/parent-{d}",
            source_checkpoint_id=_uuid(rng),
            final_checkpoint_id=_uuid(rng),
            sst_ids=tuple(s.id for s in ssts[d * 100 : d * 100 + 100]),
        )
        for d in range(num_external_dbs)
    )
    checkpoints = tuple(
        Checkpoint(
            id=_uuid(rng),
            manifest_id=1_000 + c,
            create_time_s=1_700_000_000 + c,
            expire_time_s=None if c % 2 else 1_700_086_400 + c,
            metadata=WriterCheckpoint(epoch=7) if c == 0 else None,
            name=f"tag-{c}" if c % 2 else None,
        )
        for c in range(num_checkpoints)
    )
    return Manifest(
        initialized=True,
        writer_epoch=7,
        compactor_epoch=3,
        replay_after_wal_id=41_000,
        wal_id_last_seen=41_250,
        next_wal_sst_id=41_251,
        last_l0_seq=num_ssts * 1_000,
        l0_last_compacted=views[num_l0].view_id if num_l0 < len(views) else None,
        external_dbs=external_dbs,
        ssts=tuple(ssts),
        l0=l0,
        compacted=runs,
        checkpoints=checkpoints,
    )
