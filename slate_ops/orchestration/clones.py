"""Clones in Dagster: ``clone_op`` and ``clone_job``, which create (or finish) one clone of a database.

Clones declared in the databases config (``parent: <name>``) are assets downstream of their parent's
asset; materializing one creates the clone when it is missing (see
:mod:`~slate_ops.orchestration.assets`). ``clone_job`` creates a clone on request, configured or
not: its run carries the parent's ``slate_ops/db`` tag, since cloning writes the parent's manifest
(the source and final checkpoints). See docs/design/clones-and-destroy.md.

``clone_job`` runs come from an operator (UI launchpad or ``dg launch``) with the tag
``slate_ops/db=<parent>`` and the op config ``clone_name`` (a configured clone, or a new name with
``clone_path``) and optionally ``checkpoint``.
"""

# No `from __future__ import annotations` here: Dagster reads the config and resource annotations
# of decorated functions at runtime.

import dataclasses
import uuid
from dataclasses import dataclass

import dagster as dg
from pydantic import Field

from slate_ops.errors import ConfigError
from slate_ops.orchestration import runs
from slate_ops.orchestration.checks import record_state
from slate_ops.orchestration.metadata import metadata_of
from slate_ops.orchestration.naming import DEFAULT, Domain, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource
from slate_ops.orchestration.runs import DB_TAG

CLONE_JOB = "clone_job"
"""Name of the job that runs :func:`clone_op`."""


class CloneConfig(dg.Config):
    """Run config of :func:`clone_op`."""

    database: str | None = Field(
        default=None,
        description=f"The parent database; defaults to the run's {DB_TAG} tag (both set: they must agree).",
    )
    clone_name: str = Field(
        description="The clone's name: a configured database whose parent is `database`, or a new name "
        "used in logs and metadata (then `clone_path` is required)."
    )
    clone_path: str | None = Field(
        default=None,
        description="The clone's path in the parent's store; defaults to the configured clone's path.",
    )
    checkpoint: str | None = Field(
        default=None,
        description="Clone the parent at this checkpoint id (UUID); default: its current state.",
    )


@dataclass(frozen=True)
class CloneResult:
    """What :func:`clone_op` created (either engine, through the parent's admin handle).

    ``source_checkpoint_id``: the checkpoint it was cloned at when one was given (else the clone
    was taken from the parent's current state through a short-lived checkpoint: None);
    ``final_checkpoint_id``: the checkpoint the clone added to its parent to pin what it reads
    (None on a re-run that found the clone complete); ``external_dbs``: how many databases the
    clone reads SSTs of."""

    parent: str
    clone_name: str
    clone_path: str
    manifest_id: int
    initialized: bool
    source_checkpoint_id: uuid.UUID | None
    final_checkpoint_id: uuid.UUID | None
    external_dbs: int


def build_clone_op(naming: Naming = DEFAULT) -> dg.OpDefinition:
    """``clone_op`` of the fleet ``naming`` names."""

    @dg.op(
        name=naming.name("clone_op"),
        description="Create (or finish creating) a clone of the database and report it.",
        required_resource_keys=naming.slate_keys,
    )
    def _op(context: dg.OpExecutionContext, config: CloneConfig) -> dg.Output[CloneResult]:
        parent_name = runs.target_database(context, config.database)
        output: dg.Output[CloneResult]
        output, requests = runs.metered_run(
            context,
            naming,
            parent_name,
            lambda: clone(context, config, naming.slate(context), parent_name, naming),
        )
        return dg.Output(output.value, metadata={**output.metadata, **requests})

    return _op


def clone(
    context: dg.OpExecutionContext,
    config: CloneConfig,
    slate: SlateDatabasesResource,
    parent_name: str,
    naming: Naming = DEFAULT,
) -> dg.Output[CloneResult]:
    """The step of ``clone_op``: clone ``parent_name`` as ``config`` says and record both databases."""
    parent = slate.database(parent_name)
    configured = next((d for d in slate.config.databases if d.name == config.clone_name), None)
    if configured is not None and configured.parent != parent_name:
        raise ConfigError(
            f"database {config.clone_name!r} is configured with parent {configured.parent!r}, "
            f"not {parent_name!r}; fix the config or pick another clone_name"
        )
    clone_path = config.clone_path or (configured.path if configured is not None else None)
    if clone_path is None:
        raise ConfigError(f"clone {config.clone_name!r} is not configured: give clone_path in the op config")
    if configured is not None and config.clone_path is not None and config.clone_path != configured.path:
        raise ConfigError(
            f"clone_path {config.clone_path!r} differs from the configured path {configured.path!r} "
            f"of {config.clone_name!r}"
        )
    checkpoint = _checkpoint_id(config.checkpoint)
    handle = slate.handle_for(parent)
    before = {c.id for c in handle.list_checkpoints()}
    created = handle.clone_to(clone_path, checkpoint=checkpoint)
    added = [c.id for c in handle.list_checkpoints() if c.id not in before and c.id != checkpoint]
    result = CloneResult(
        parent=parent_name,
        clone_name=config.clone_name,
        clone_path=clone_path,
        manifest_id=created.manifest_id,
        initialized=created.initialized,
        source_checkpoint_id=checkpoint,
        final_checkpoint_id=added[-1] if added else None,
        external_dbs=created.external_dbs,
    )
    at = f"checkpoint {checkpoint}" if checkpoint is not None else "its current state"
    context.log.info(
        f"{config.clone_name} ({clone_path}) is a clone of {parent_name} at {at}; "
        f"manifest {result.manifest_id}"
    )
    for name in (parent_name, config.clone_name):
        record_state(
            context, slate, name, after="cloning", naming=naming
        )  # their checks as the run left them
    return dg.Output(result, metadata=clone_metadata(result))


def clone_metadata(result: CloneResult) -> dict[str, dg.MetadataValue]:
    """The clone as run metadata: every field of :class:`CloneResult` (a checkpoint not known: ``-``)."""
    values = {field.name: getattr(result, field.name) for field in dataclasses.fields(result)}
    return metadata_of(**{name: "-" if value is None else value for name, value in values.items()})


def clone_run_config(
    parent: str, clone_name: str, clone_path: str | None = None, checkpoint: str | None = None
) -> dict[str, object]:
    """Run config of the clone job (tag the run ``slate_ops/db=<parent>``)."""
    config: dict[str, object] = {"database": parent, "clone_name": clone_name}
    if clone_path is not None:
        config["clone_path"] = clone_path
    if checkpoint is not None:
        config["checkpoint"] = checkpoint
    return runs.op_run_config("clone_op", **config)


def _checkpoint_id(text: str | None) -> uuid.UUID | None:
    if text is None:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ConfigError(f"checkpoint {text!r} is not a checkpoint id (a UUID)") from None


def build(naming: Naming = DEFAULT) -> Domain:
    """The clones domain of the fleet ``naming`` names: ``clone_job``."""
    op = build_clone_op(naming)
    job = runs.one_op_job(
        op,
        name=naming.name(CLONE_JOB),
        description=f"Create (or finish) a clone of one database (run tag {DB_TAG}=<parent>) and report it.",
    )
    return Domain(jobs={CLONE_JOB: job}, ops={"clone_op": op})


_DEFAULT = build()
clone_op = _DEFAULT.ops["clone_op"]
clone_job = _DEFAULT.jobs[CLONE_JOB]
