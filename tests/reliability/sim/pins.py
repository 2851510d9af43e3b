"""Checkpoints, tags and clones just created: read once, they must then keep that content."""

from __future__ import annotations

import uuid
from typing import Literal

from slate_ops.manifest.store import ManifestStore
from tests.reliability.sim.context import Clone, Pinned, SimContext
from tests.reliability.sim.runtime import MAIN, diff


def track_checkpoint(
    ctx: SimContext,
    kind: Literal["checkpoint", "tag"],
    checkpoint_id: uuid.UUID,
    lo: int,
    hi: int,
    what: str,
    content: dict[bytes, bytes] | None = None,
    name: str | None = None,
) -> None:
    """Read a checkpoint just created: it must hold the history at a prefix in ``[lo, hi]`` (or
    ``content``, when made from another checkpoint); from now on it must read the same."""
    latest = ManifestStore(ctx.inner, MAIN).read_latest_required().value
    checkpoint = latest.checkpoint(checkpoint_id)
    if checkpoint is None:
        raise ctx.violation(f"{what} checkpoint {checkpoint_id} is not in the manifest after its creation")
    observed = ctx.oracle_read(MAIN, checkpoint_id)
    ctx.checks["checkpoint_content"] += 1
    if content is not None:
        if observed != content:
            raise ctx.violation(
                f"{what} checkpoint made from another reads differently: {diff(observed, content)}"
            )
    elif ctx.model.first_match(observed, max(lo, 0), hi) is None:
        raise ctx.violation(
            f"{what} checkpoint {checkpoint_id} holds no prefix of the history in [{lo}, {hi}]: "
            f"vs the acknowledged state {diff(observed, ctx.model.state(lo))}"
        )
    ctx.pinned[checkpoint_id] = Pinned(kind, checkpoint_id, observed, checkpoint.expire_time_s, name)
    ctx.figures[f"{kind}s_created"] += 1


def resolve_clone(ctx: SimContext, clone: Clone) -> None:
    """A clone just created reads its source checkpoint's content, or a prefix of main's history."""
    observed = ctx.oracle_read(clone.path)
    ctx.checks["clone_content"] += 1
    if clone.expected is not None:
        if observed != clone.expected:
            raise ctx.violation(
                f"{clone.path} differs from its source checkpoint: {diff(observed, clone.expected)}"
            )
    elif ctx.model.first_match(observed, clone.lo, clone.hi) is None:
        raise ctx.violation(
            f"{clone.path} holds no prefix of the parent's history in [{clone.lo}, {clone.hi}]"
        )
    clone.content = observed
    clone.state = "live"
    ctx.figures["clones_created"] += 1
