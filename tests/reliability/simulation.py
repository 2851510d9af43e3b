"""Seeded multi-actor simulation of slate_ops (issue 8, "Seeded multi-actor simulation"; issue 12,
the lifecycle of a family of databases).

A writer, a tailing reader, a compactor, a garbage collector and an admin actor (checkpoints, tags,
clones) share one database; a lifecycle actor (tests/reliability/sim/actors/lifecycle.py) operates on a
family of databases around it: clones (of main, of clones, of shards, of merged databases), splits,
merges, writes, tags, rollbacks, compactions, GC of every database and soft and hard destroys of any
member. A scheduler driven by ``random.Random(seed)`` picks the next actor and its action; every
action is one synchronous call of the public API (the writer's flusher thread and the reader's poll
thread are replaced by explicit steps), so the only source of choice is the seed. Between steps the
scheduler advances one seeded :class:`~slate_ops.runtime.ManualRuntime`, passed as ``clock=`` to every
component: the memory store's ``last_modified``, the sequenced stores' cache age and every UUID and
ULID come from it, without patching anything, so the same seed gives the same trace, the same
object names and the same store requests.

Faults come from one :class:`~slate_ops.objstore.FaultInjectingStore` per actor incarnation (seeded
from the simulation seed): transient errors before a request is applied, lost responses after a put
was applied, crashes part-way through an operation (the actor's process "dies"; a new incarnation
reopens), and stalls — a request hangs, the clock moves on and another actor runs a step in the
middle of the stalled operation (a deterministic interleaving inside an operation).

Invariants, checked as the run goes:

* every write acknowledged as durable is readable: a fresh reader sees the writer's history at some
  prefix between the acknowledged one and the issued one, never earlier than any state seen before;
  after a writer crash, the reopened database holds such a prefix (unacknowledged writes may be lost);
  a write that returned from ``await_durable=True`` counts as acknowledged, with every write before it;
* the reader's reads are monotonic and consistent: each get or scan matches the writer's history at
  a prefix no earlier than the reader has already seen;
* the writer reads its own writes; a scan held open across steps (while compaction and GC go on)
  completes as a snapshot of the moment it started (SlateDB issue 604: GC under an in-flight read);
* checkpoints, tags and clones read their pinned content for as long as they live;
* GC never deletes an object that the latest manifest, a live checkpoint or a live reader or writer
  references, nothing outside its database, no database that was not destroyed, and a dry run
  writes nothing;
* :func:`slate_ops.admin.verify_db` reports no error-severity problem (SSTs of the latest and every
  live checkpoint's manifest exist, runs are ordered, checkpoint manifests exist, GC boundaries
  below the latest ids), and every WAL SST those manifests need exists;
* :func:`slate_ops.admin.reachability.check_references` over every database finds nothing (every
  SST a live database can read exists; every external entry is pinned by its own unexpired final
  checkpoint) — after every lifecycle step and in every full sweep;
* every live lifecycle database reads exactly its model (a clone its parent's content, a shard its
  source's within its range, a merge the union, plus its own writes; after a rollback the tag's), and
  its tags read what they pinned; after a crashed writer session it holds every acknowledged write;
* a fenced (zombie) writer or compactor never acknowledges a flush or commits;
* an interrupted admin or lifecycle operation (clone, split, merge, destroy, tag, rollback)
  completes when re-run; a finished hard destroy leaves only its tombstone and fences (the tombstone
  manifest, the WAL fence, one ``.compactions`` file, ``gc/`` marker and boundaries), nothing a re-run
  would delete and nothing a reader opens;
* at the end, with faults off: a reopened writer recovers, maintenance runs cleanly, GC leaves no
  unreferenced SST or WAL SST older than ``min_age``, and every destroyed database GC may delete
  (grace period over, no live checkpoint) is gone.

A failed invariant (or an error no fault explains) raises :class:`InvariantViolation` naming the
seed, the step, the command that replays it and the tail of the trace.

The code, under ``tests/reliability/sim/`` (this module is the entry point): ``runtime.py``
(configuration, deterministic runtime, stores, model), ``context.py`` (:class:`SimContext`, the
shared world every actor receives), ``scheduler.py`` (:class:`Simulation`: steps, actor choice,
stalls, the final phase), ``actors/`` (writer, reader, compactor, GC, admin; ``lifecycle.py`` the
lifecycle actor), ``pins.py`` (checkpoints, tags and clones keep their content), ``checks.py`` (the
full sweep) and ``invariants.py`` (the family-wide invariants).

Not simulated: the background threads themselves (their work is done by explicit steps, so a race
between a flusher thread and a caller is out of scope here; tests/engine/test_concurrency.py covers
those; ``await_durable`` runs the flusher's round synchronously), and real S3 (the soak test).
"""

from __future__ import annotations

from tests.reliability.sim.context import SimContext
from tests.reliability.sim.runtime import WRITER_OPTIONS, InvariantViolation, SimConfig, SimResult, TraceEntry
from tests.reliability.sim.scheduler import Simulation, run_simulation

__all__ = [
    "WRITER_OPTIONS",
    "InvariantViolation",
    "SimConfig",
    "SimContext",
    "SimResult",
    "Simulation",
    "TraceEntry",
    "run_simulation",
]
