"""The Dagster code location of slate_ops (loaded by ``workspace.yaml``).

``defs`` merges :func:`slate_ops.orchestration.database_definitions` (one asset per database with
its checks, ``slate_ops_databases_job`` and the resources, for the databases config:
``$SLATE_OPS_CONFIG``, else the embedded default with one ``demo`` database under ``./.slate``) with
one Definitions per domain, ``jobs.DOMAINS`` (checkpoints, compaction, GC, tags, clones, rescaling,
maintenance: each domain's jobs, schedules and sensors).
"""

from __future__ import annotations

import dagster as dg

import jobs
from slate_ops.orchestration import SlateOpsConfig, database_definitions


def make_definitions(config: SlateOpsConfig | None = None) -> dg.Definitions:
    """Everything Dagster shows, for ``config`` (default: the loaded config file)."""
    return dg.Definitions.merge(database_definitions(config), *jobs.DOMAINS)


defs = make_definitions()
