"""Run and asset metadata shared by the domains: a database's state (manifest summary, LSM shape,
checkpoints and tags) and the Markdown and time helpers of the reports' tables."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime

import dagster as dg

from slate_ops.admin import DbStatus, LsmShape
from slate_ops.admin.handle.state import DbState
from slate_ops.admin.shape import shape_rows
from slate_ops.clock import UTC_SECONDS, render_utc

MetadataInput = dg.MetadataValue | str | bool | int | float | uuid.UUID
"""What :func:`metadata_of` takes: a metadata value, or a plain value it converts."""


def metadata_of(**values: MetadataInput) -> dict[str, dg.MetadataValue]:
    """``values`` as run or asset metadata: a bool, int or float as that type, a text or UUID as text;
    a metadata value (Markdown, JSON, a table) as it is."""
    return {key: _metadata_value(value) for key, value in values.items()}


def _metadata_value(value: MetadataInput) -> dg.MetadataValue:
    if isinstance(value, dg.MetadataValue):
        return value
    if isinstance(value, bool):  # before int: a bool is an int
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(value)
    return dg.MetadataValue.text(str(value))


def md_cell(value: object) -> str:
    """``value`` as a Markdown table cell: ``|`` escaped, ``-`` for None."""
    return "-" if value is None else str(value).replace("|", "\\|")


def utc_text(when: float | datetime | None, fmt: str = UTC_SECONDS) -> str:
    """``when`` (epoch seconds or a datetime) as UTC text; ``never`` for None."""
    return "never" if when is None else render_utc(when, fmt)


def status_metadata(status: DbStatus) -> dict[str, dg.MetadataValue]:
    """The manifest summary of ``describe_db`` as asset metadata: every field of :class:`DbStatus`
    but the path, ``destroyed_at_s`` last and only once destroyed."""
    counters = [f.name for f in dataclasses.fields(status) if f.name not in ("path", "destroyed_at_s")]
    metadata = metadata_of(**{name: getattr(status, name) for name in counters})
    if status.destroyed_at_s is not None:
        metadata["destroyed_at_s"] = dg.MetadataValue.int(status.destroyed_at_s)
    return metadata


def database_metadata(state: DbState) -> dict[str, dg.MetadataValue]:
    """What an observation or materialization records of a database's ``state`` (a handle's
    ``state_since``): :func:`status_metadata` plus ``lsm_shape`` (:func:`shape_markdown`),
    ``checkpoint_names`` (tags left out), ``tag_count`` and ``tag_names``. No further reads."""
    return {
        **status_metadata(state.status),
        **metadata_of(
            lsm_shape=dg.MetadataValue.md(shape_markdown(state.shape)),
            checkpoint_names=", ".join(state.checkpoint_names) or "-",
            tag_count=len(state.tag_names),
            tag_names=", ".join(state.tag_names) or "-",
        ),
    }


def shape_markdown(shape: LsmShape) -> str:
    """A Markdown table of ``shape``: one row per L0 SST and per sorted run, newest first."""
    title = f"Manifest {shape.manifest_id}: {len(shape.l0)} L0 SST(s), {len(shape.sorted_runs)} sorted run(s)"
    rows = shape_rows(shape)
    if not rows:
        return f"{title}."
    lines = [
        f"{title}:",
        "",
        "| level | id | SSTs | first key | last key | bytes | entries |",
        "| --- | --- | ---: | --- | --- | ---: | ---: |",
    ]
    for row in rows:
        cells = [row["level"], row["id"], row["ssts"], row["first_key"], row["last_key"]]
        cells += [row["bytes"], row["entries"]]
        lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def shape_metadata(shape: LsmShape) -> dict[str, dg.MetadataValue]:
    """The shape as asset metadata, with the same counter names as the manifest sensor's observations."""
    sst_bytes = sum(s.size_bytes for s in shape.l0) + sum(r.size_bytes for r in shape.sorted_runs)
    return metadata_of(
        manifest_id=shape.manifest_id,
        l0_ssts=len(shape.l0),
        sorted_runs=len(shape.sorted_runs),
        ssts=len(shape.l0) + sum(r.ssts for r in shape.sorted_runs),
        sst_bytes=sst_bytes,
        lsm_shape=dg.MetadataValue.md(shape_markdown(shape)),
    )
