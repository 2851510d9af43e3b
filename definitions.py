"""The Dagster code location of slate_ops (loaded by ``workspace.yaml``).

``defs`` is built from the databases config (``$SLATE_OPS_CONFIG``, else the embedded default with
one ``demo`` database under ``./.slate``), the assets, sensor and resource of
:mod:`slate_ops.orchestration`, and the jobs and schedules of the ``jobs`` package.
"""

from __future__ import annotations

import dagster as dg

import jobs
from slate_ops.orchestration import SlateOpsConfig, build_definitions


def make_definitions(config: SlateOpsConfig | None = None) -> dg.Definitions:
    """Everything Dagster shows, for ``config`` (default: the loaded config file)."""
    return build_definitions(config, jobs=jobs.ALL_JOBS, schedules=jobs.ALL_SCHEDULES)


defs = make_definitions()
