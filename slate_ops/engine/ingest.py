"""Ingesting SSTs written elsewhere (bulk loads) into L0 through the writer.

Reads order sources by structure, newest first: memtables, then L0 views in manifest order, then
sorted runs. SSTs that must shadow everything already stored therefore go to the *front of L0*
(a sorted run, even the newest, is read after every L0 view), and their rows carry one sequence
number above every stored one, so sequence order agrees with that structure. The compactor later
folds them into sorted runs like any L0 flush. Usage (``slate_ops.spark.bulk_load`` does this)::

    with Db.open(path, store) as db:  # fences the running writer, replays its WAL
        seq = reserve_ingest_seq(db)  # its writes go to L0 first; seq is above all of them
        ...  # write key-ordered SSTs whose rows all have `seq`, under <db>/compacted/
        ingest_l0(db, ssts, seq)  # one manifest update under the writer epoch
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ulid import ULID

from slate_ops.engine.db import Db
from slate_ops.errors import FencedError, InvalidArgumentError
from slate_ops.manifest.model import CompactedSst, Manifest, SstView
from slate_ops.manifest.store import VersionedManifest


def reserve_ingest_seq(db: Db) -> int:
    """Flush every write of ``db`` into L0, then reserve a sequence number above all stored data.

    The number is above ``last_l0_seq`` and above the ``max_seq`` of every SST the manifest lists
    (clones and unions may bring SSTs with higher numbers). Writes through ``db`` after this call
    make :func:`ingest_l0` refuse the number.
    """
    db.flush_memtable()
    with db._write_lock:
        db._check_usable()
        manifest = db._lsm.manifest
        floor = max([db._last_seq, manifest.last_l0_seq, *(s.info.max_seq for s in manifest.ssts)])
        db._last_seq = floor + 1
        return db._last_seq


def ingest_l0(db: Db, ssts: Sequence[CompactedSst], seq: int) -> VersionedManifest:
    """Commit ``ssts`` (key-ordered, non-overlapping, every row at ``seq``) as the newest L0 views.

    One manifest update under the writer's epoch adds the SSTs, puts one view per SST (in key
    order) in front of L0 and raises ``last_l0_seq`` to ``seq``, and re-establishes the writer's
    checkpoint. Refused with :class:`InvalidArgumentError` before anything is written if ``seq``
    is not the number :func:`reserve_ingest_seq` just reserved (a write went through ``db`` since),
    if an SST holds another sequence number, or if two SSTs overlap. A fenced writer raises
    :class:`FencedError`; the SST files are then orphans that GC deletes.
    """
    ordered = sorted(ssts, key=lambda s: s.info.first_key)
    for sst in ordered:
        if (sst.info.min_seq, sst.info.max_seq) != (seq, seq):
            raise InvalidArgumentError(
                f"SST {sst.id} holds sequence numbers {sst.info.min_seq}..{sst.info.max_seq}, not only "
                f"the reserved {seq}; write every ingested row with the reserved number"
            )
    for before, after in itertools.pairwise(ordered):
        if before.info.last_key >= after.info.first_key:
            raise InvalidArgumentError(
                f"SSTs {before.id} and {after.id} overlap (last key {before.info.last_key!r} >= first key "
                f"{after.info.first_key!r}); ingested SSTs must form one key-ordered run"
            )
    views = tuple(SstView(ULID(), s.id) for s in ordered)

    def change(manifest: Manifest) -> Manifest:
        return manifest.with_changes(
            ssts=(*manifest.ssts, *ordered),
            l0=(*views, *manifest.l0),
            last_l0_seq=max(manifest.last_l0_seq, seq),
        )

    with db._flush_lock:
        with db._write_lock:
            db._check_usable()
            if db._last_seq != seq or db._immutables or len(db._memtable):
                raise InvalidArgumentError(
                    f"sequence number {seq} is not the one just reserved on the writer of {db.path!r} "
                    f"(its last is {db._last_seq}, or writes are not yet in L0); call "
                    "reserve_ingest_seq again and rewrite the SSTs"
                )
        try:
            return db._commit(change, reestablish=True)
        except FencedError as error:
            db._fail(error)
            raise


__all__ = ["ingest_l0", "reserve_ingest_seq"]
