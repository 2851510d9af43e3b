"""Ingesting SSTs written elsewhere (bulk loads) into L0 through the writer.

Reads order sources by structure, newest first: memtables, then L0 views in manifest order, then
sorted runs. SSTs that must shadow everything already stored therefore go to the *front of L0*
(a sorted run, even the newest, is read after every L0 view), and their rows carry one sequence
number above every stored one, so sequence order agrees with that structure. The compactor later
folds them into sorted runs like any L0 flush. Usage (``slate_ops.spark.bulk_load`` does this)::

    with Db.open(path, store) as db:  # fences the running writer, replays its WAL
        seq = db.reserve_ingest_seq()  # its writes go to L0 first; seq is above all of them
        ...  # write key-ordered SSTs whose rows all have `seq`, under <db>/compacted/
        db.ingest_l0(ssts, seq)  # one manifest update under the writer epoch

This module checks the SSTs (:func:`ingest_order`); the two :class:`~slate_ops.engine.Db` methods
do the rest.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from slate_ops.errors import InvalidArgumentError
from slate_ops.keytext import render_bytes
from slate_ops.manifest.model import CompactedSst


def ingest_order(ssts: Sequence[CompactedSst], seq: int) -> list[CompactedSst]:
    """``ssts`` in key order, after checking that every row has ``seq`` and that none overlap
    (:class:`InvalidArgumentError` otherwise, before anything is written)."""
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
                f"SSTs {before.id} and {after.id} overlap (last key {render_bytes(before.info.last_key)} "
                f">= first key {render_bytes(after.info.first_key)}); ingested SSTs must form one "
                "key-ordered run"
            )
    return ordered


__all__ = ["ingest_order"]
