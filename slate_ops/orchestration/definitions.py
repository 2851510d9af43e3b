"""The Dagster code location of slate_ops: ``defs``, :func:`~slate_ops.orchestration.build_definitions`
of the loaded config (``$SLATE_OPS_CONFIG``, else the embedded default with the databases ``demo``,
its clone and its shards under ``./.slate``), with the default resource keys and no prefix.

Load it from an installed slate_ops with ``python_module: slate_ops.orchestration.definitions`` in a
workspace, ``dg launch -m slate_ops.orchestration.definitions --job ...``, or as a dg project's
``code_location_target_module`` (the repository's ``[tool.dg.project]`` in pyproject.toml, which
``dg check defs`` / ``dg dev`` from the checkout read). The repository's top-level ``definitions.py``
re-exports it.
"""

from __future__ import annotations

import dagster as dg

from slate_ops.orchestration.builder import build_definitions
from slate_ops.orchestration.config import SlateOpsConfig


def make_definitions(config: SlateOpsConfig | None = None) -> dg.Definitions:
    """Everything Dagster shows, for ``config`` (default: the loaded config file)."""
    return build_definitions(config)


defs = make_definitions()
