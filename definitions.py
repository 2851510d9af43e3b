"""The repository's Dagster code location (loaded by ``workspace.yaml``): a thin delegate to
:mod:`slate_ops.orchestration.definitions`, which the installed package holds (the wheel installs
nothing at the top level but ``slate_ops``)."""

from __future__ import annotations

from slate_ops.orchestration.definitions import defs, make_definitions

__all__ = ["defs", "make_definitions"]
