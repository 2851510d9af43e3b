"""The adversarial simulation (issue 19, "The proof must model the adversary").

The cooperative simulation (tests/reliability/simulation.py) runs actors that never race one another
on purpose: nobody opens a second writer at the same moment, nobody keeps a paused writer across a
destroy, nobody calls admin functions on checkpoints it does not own, every name is tame. Here a
seeded scheduler runs *episodes* of adversarial actors over a family of databases (plain, nested,
clones, shards, the root database, hostile names), next to objects that belong to no database:

* **race**: two or three writers race ``Db.open`` on one path and write (``await_durable`` puts,
  ``flush``, ``flush_memtable``, ``close``), their store calls interleaved one at a time by a seeded
  :class:`~tests.reliability.sim.interleave.Interleaver` (real threads, one holding the baton);
* **paused writer**: a writer opens and writes, then is frozen (no polling: the writer's timers are
  steps here, so it only sees the store when it calls it) across a soft destroy, a soft then a hard
  destroy, a soft destroy and GC past the grace period, a hard destroy and re-creation of the path,
  a split, a rollback to a tag, or a takeover by another writer; then it resumes and writes, flushes
  and closes;
* **paused processes**: a compactor, a second compactor, GC and a writer on one database,
  interleaved with clock jumps up to twice GC's ``min_age`` at the hand-overs (the stalled process
  of SlateDB's GC boundary-file design, in the manifest and ``.compactions`` namespaces);
* **admin**: ``refresh_checkpoint`` (lifetimes from negative to a million years) and
  ``delete_checkpoint`` on random checkpoint ids of random databases — final checkpoints of clones and
  shards, tags, the user's own checkpoints, ids that do not exist — then the clock past every expiry
  and GC of every database;
* **names**: databases created, opened and cloned under hostile names: reserved directory names as the
  last component (``a/wal``, ``a/manifest``, ``a/gc``, ...), nested names at several depths, the root;
* and the cooperative ones the adversary needs material from: writer sessions, clones, splits, tags,
  destroys, compaction and GC of everything.

Invariants, after every episode (and, for acknowledgements, at the moment of the acknowledgement):

1. **references**: :func:`slate_ops.admin.check_references` over every database not deleted finds
   nothing missing or unpinned;
2. **no fenced writer acknowledges**: when ``put(await_durable=True)``, ``flush``, ``flush_memtable`` or
   ``close`` returns, the database it opened is neither deleted nor deleted and created again, and no
   newer writer epoch superseded it first: outside interleaved episodes the latest manifest still
   holds its epoch; inside them no other task's manifest commit with a higher writer epoch precedes
   (in the interleaver's order of store calls) any of the WAL, L0 or manifest writes this
   acknowledgement covers. A ``FencedError`` needs a cause (a newer epoch or a deletion), and an
   ``EpochCollisionError`` is a violation: no two processes here share an epoch;
3. **no deleted database comes back**: a deleted database's path holds no manifest but tombstones, a
   reader refuses it with a typed error, and a database re-created there holds nothing old;
4. **every acknowledged write of a live database is readable**: a fresh reader sees, for every key,
   the latest acknowledged write or a write issued after it (by any writer); then the model settles on
   what it saw. Tags read what they pinned;
5. objects that belong to no database are never deleted or changed; nobody retries without end (a
   task making more than ``max_calls`` store calls in an episode is a violation) or blocks outside a
   store call; and every error is typed (a :class:`~slate_ops.errors.SlateOpsError`) and one the
   situation explains.

Determinism: one seeded :class:`~slate_ops.runtime.ManualRuntime` passed as ``clock=`` to everything,
so time and every id come from it (:func:`~tests.reliability.sim.runtime.sim_runtime`; nothing is
patched for it), every choice from ``random.Random``
seeded from the seed, WAL fetches one at a time; the same seed gives the same trace and the same
objects, byte for byte.

The files, one concern each: ``model.py`` (configuration, result, the model of databases and
writers), ``context.py`` (:class:`AdvContext`, the shared world every actor receives),
``scheduler.py`` (the run loop), ``writers.py`` (writer sessions and invariant 2), ``invariants.py``
(the checks after every episode), ``moves.py`` (the cooperative moves), and one module per
adversarial actor: ``races.py``, ``paused_writer.py``, ``paused_processes.py``, ``admin_calls.py``,
``names.py``.
"""

from tests.reliability.sim.adversary.context import AdvContext
from tests.reliability.sim.adversary.model import AdvConfig, AdvResult, Member, Writer
from tests.reliability.sim.adversary.scheduler import Adversary, run_adversary

__all__ = ["AdvConfig", "AdvContext", "AdvResult", "Adversary", "Member", "Writer", "run_adversary"]
