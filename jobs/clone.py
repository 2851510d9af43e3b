"""Cloning: one op, configured per run with the parent database and the clone, so every run clones
exactly one database and carries the parent's ``slate_ops/db`` tag (cloning writes the parent's
manifest: the clone's source and final checkpoints).

Runs come from an operator (UI launchpad or ``dagster job execute``) with the tag
``slate_ops/db=<parent>`` and the op config ``clone_name`` (a configured clone, or a new name with
``clone_path``) and optionally ``checkpoint``. Configured clones are also created by materializing
their asset, which is downstream of the parent's.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import dagster as dg

from slate_ops.orchestration import DB_TAG
from slate_ops.orchestration.clones import CLONE_JOB, clone_op


@dg.job(
    name=CLONE_JOB,
    description=f"Create (or finish) a clone of one database (run tag {DB_TAG}=<parent>) and report it.",
)
def clone_job() -> None:
    clone_op()
