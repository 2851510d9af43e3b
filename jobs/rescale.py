"""Rescaling: split one database into key-range shards, or merge databases into one, on demand.

Runs come from an operator (UI launchpad or ``dagster job execute``) with the tag
``slate_ops/db=<source>`` and op config validated by
:class:`~slate_ops.orchestration.rescale.RescaleConfig`::

    ops:
      rescale_op:
        config:
          operation: split
          database: demo
          split_keys: ["k5000"]
          targets: [{name: demo_low}, {name: demo_high}]

Shards declared in the databases config with ``rescaled_from: [demo]`` appear as assets
downstream of ``demo``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import dagster as dg

from slate_ops.orchestration import DB_TAG
from slate_ops.orchestration.rescale import RESCALE_JOB, rescale_op


@dg.job(
    name=RESCALE_JOB,
    description=f"Split a database into shards or merge databases into one (run tag {DB_TAG}=<source>); "
    "metadata only, no SST is copied.",
)
def rescale_job() -> None:
    rescale_op()
