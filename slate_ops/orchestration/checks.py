"""Asset checks of every database asset: :func:`slate_ops.admin.verify_db`, one check per verification.

Each database gets one ``multi_asset_check`` (op ``slate_ops__<name>__checks``) with the checks of
:data:`slate_ops.admin.verify.CHECKS` on ``slate_ops/<name>``, all non-blocking: they report, they
never stop a materialization. A failed check carries its severity (ERROR, or WARN for maintenance
that is behind), a description naming the first offending object, and metadata ``problem_count``
and ``problems`` (a Markdown list of every object and why, the first :data:`PROBLEMS_SHOWN`). A
database that cannot be read (e.g. not created yet) fails every check with the error.
"""

# No `from __future__ import annotations` here: Dagster reads the resource annotations of decorated
# functions at runtime.

import logging
import re
from collections.abc import Iterator, Mapping

import dagster as dg

from slate_ops.admin.gc_health import GcHealth
from slate_ops.admin.handle import DatabaseHandle
from slate_ops.admin.verify import CHECKS, CheckResult, Severity
from slate_ops.errors import SlateOpsError
from slate_ops.orchestration.assets import database_asset_spec, origins
from slate_ops.orchestration.compaction import l0_threshold
from slate_ops.orchestration.config import DatabaseConfig, SlateOpsConfig
from slate_ops.orchestration.cost_assets import database_cost_metadata
from slate_ops.orchestration.lineage import lineage_tags, lineage_version
from slate_ops.orchestration.metadata import database_metadata
from slate_ops.orchestration.naming import DEFAULT, Naming
from slate_ops.orchestration.resources import SlateDatabasesResource

GC_HEALTH_CHECK = "gc_health"
GC_HEALTH_DESCRIPTION = (
    "Garbage collection keeps up: no garbage eligible for GC for longer than gc.health_intervals GC "
    "intervals, and no boundary left unadvanced that long while garbage waits (a dead GC)."
)
ALL_CHECKS = (*CHECKS, GC_HEALTH_CHECK)
"""The check names of every database asset: :data:`slate_ops.admin.verify.CHECKS` and
:data:`GC_HEALTH_CHECK` (the handle's ``gc_health``)."""

PROBLEMS_SHOWN = 50
"""At most this many problems are listed in a check's metadata (``problem_count`` has them all)."""

_SEVERITY = {Severity.ERROR: dg.AssetCheckSeverity.ERROR, Severity.WARN: dg.AssetCheckSeverity.WARN}
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def check_op_name(name: str, naming: Naming = DEFAULT) -> str:
    """The op that runs the checks of database ``name`` (``<prefix>slate_ops__<name>__checks``)."""
    return naming.name(f"slate_ops__{name}__checks")


def build_database_check(
    db: DatabaseConfig, config: SlateOpsConfig | None = None, naming: Naming = DEFAULT
) -> dg.AssetChecksDefinition:
    """The checks of ``db``'s asset (``slate_ops/<db.name>``, or as ``naming`` names it), computed by
    one :func:`verify_db` call."""
    name = db.name
    key = database_asset_spec(
        db, config if config is not None else SlateOpsConfig(databases=[db]), naming
    ).key
    specs = [
        dg.AssetCheckSpec(check, asset=key, description=description, blocking=False)
        for check, (_, description) in CHECKS.items()
    ]
    specs.append(
        dg.AssetCheckSpec(GC_HEALTH_CHECK, asset=key, description=GC_HEALTH_DESCRIPTION, blocking=False)
    )

    @dg.multi_asset_check(
        specs=specs,
        name=check_op_name(name, naming),
        can_subset=True,
        required_resource_keys=naming.slate_keys,
        description=f"Read-only consistency and GC-health checks of database {name!r} (its admin handle's "
        "verify and gc_health).",
    )
    def _checks(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        selected = {k.name for k in context.selected_asset_check_keys}
        for result in verify_results(naming.slate(context), name, context.log, naming):
            if result.check_name in selected:
                yield result

    return _checks


def verify_results(
    slate: SlateDatabasesResource,
    name: str,
    log: logging.Logger | dg.DagsterLogManager,
    naming: Naming = DEFAULT,
    handle: DatabaseHandle | None = None,
) -> list[dg.AssetCheckResult]:
    """Every check of database ``name`` through its admin handle (``handle``, else opened here;
    either engine): ``verify`` (one result per :data:`CHECKS`) and ``gc_health``: what its
    ``multi_asset_check`` reports, and what a maintenance run records again after changing the
    database. A database that cannot be read fails every check with the error (and a warning in
    ``log``); a GC health that cannot be assessed fails that check alone."""
    key = naming.asset_key(slate, name)
    current = slate.database(name)
    try:
        handle = handle if handle is not None else slate.handle_for(current)
    except SlateOpsError as exc:  # not created yet, unreadable: every check fails and says why
        log.warning(f"cannot verify database {name}: {type(exc).__name__}: {exc}")
        return [unverifiable_result(key, check, exc) for check in ALL_CHECKS]
    try:
        verified = [check_result(key, r) for r in handle.verify(l0_threshold=l0_threshold(current))]
    except SlateOpsError as exc:
        log.warning(f"cannot verify database {name}: {type(exc).__name__}: {exc}")
        verified = [unverifiable_result(key, check, exc) for check in CHECKS]
    return [*verified, gc_health_result(key, handle, current, log)]


def gc_health_result(
    key: dg.AssetKey,
    handle: DatabaseHandle,
    db: DatabaseConfig,
    log: logging.Logger | dg.DagsterLogManager,
) -> dg.AssetCheckResult:
    """The ``gc_health`` check of ``db`` (the handle's ``gc_health`` with its ``gc`` policy)."""
    try:
        health = handle.gc_health(db.gc.health_options(), intervals=db.gc.health_intervals)
    except SlateOpsError as exc:
        log.warning(f"cannot assess GC health of database {db.name}: {type(exc).__name__}: {exc}")
        return unverifiable_result(key, GC_HEALTH_CHECK, exc)
    return health_result(key, health)


def health_result(key: dg.AssetKey, health: GcHealth) -> dg.AssetCheckResult:
    """``health`` as the ``gc_health`` check reports it: its problems (or that GC keeps up) and its
    evidence as metadata."""
    if health.passed:
        description = "GC keeps up"
        if health.waiting_count:
            description += f" ({health.waiting_count} object(s) waiting, none overdue)"
    else:
        description = health.problems[0] + (
            f" (and {len(health.problems) - 1} more)" if len(health.problems) > 1 else ""
        )
    since = health.since_last_gc_s
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=GC_HEALTH_CHECK,
        passed=health.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=description,
        metadata={
            "engine": dg.MetadataValue.text(health.engine),
            "overdue_count": dg.MetadataValue.int(health.overdue_count),
            "overdue_bytes": dg.MetadataValue.int(health.overdue_bytes),
            "oldest_overdue_key": dg.MetadataValue.text(health.oldest_overdue_key or "-"),
            "waiting_count": dg.MetadataValue.int(health.waiting_count),
            "overdue_after_s": dg.MetadataValue.float(health.overdue_after_s),
            "since_last_gc_s": dg.MetadataValue.float(since)
            if since is not None
            else dg.MetadataValue.text("never"),
            "evidence": dg.MetadataValue.text(health.evidence),
            "problems": dg.MetadataValue.md(problems_markdown(health.problems)),
            "notes": dg.MetadataValue.md(problems_markdown(health.notes)),
        },
    )


def record_state(
    context: dg.OpExecutionContext,
    slate: SlateDatabasesResource,
    name: str,
    after: str = "maintenance",
    metadata: Mapping[str, dg.MetadataValue] | None = None,
    naming: Naming = DEFAULT,
) -> None:
    """Record the checks of ``name`` (the same :func:`verify_results` as its ``multi_asset_check``)
    and a materialization of the state the run left it in (its metadata, its requests per day by
    source as the asset's own materialization shows them, plus ``metadata``), so the
    asset's page and checks show the database as it is now, not as it was last materialized.
    Every op that changes a database calls it (real maintenance, rescaling, cloning): the stored
    database is rewritten, so this is a materialization, not an observation. A discovered database
    has no asset: nothing to record. A failed read only logs a warning (the checks say what is wrong)."""
    if not slate.configured(name):
        return
    key = naming.asset_key(slate, name)
    db = slate.database(name)
    try:  # one handle for the checks and the state (auto: one probe)
        handle: DatabaseHandle | None = slate.handle_for(db)
    except Exception:  # verify_results reports it as every check failing
        handle = None
    for result in verify_results(slate, name, context.log, naming, handle):
        context.log_event(check_evaluation(key, result))  # type: ignore[arg-type]  # supported, not typed
    try:
        state = (handle or slate.handle_for(db)).state_since(None)
        assert state is not None  # no known manifest: always read
    except Exception as exc:  # the checks already say what is wrong
        context.log.warning(f"recording {name} after {after}: {type(exc).__name__}: {exc}")
        return
    context.log_event(
        dg.AssetMaterialization(
            asset_key=key,
            description=f"the database as {after} left it",
            metadata={
                **database_metadata(state),
                **database_cost_metadata(context.instance, key, name, slate.config),
                **(metadata or {}),
            },
            # Its lineage version and provenance, as the asset's own materialization: no false "Unsynced"
            tags=lineage_tags(
                context.instance,
                key,
                lineage_version(slate.config, name),
                [naming.asset_key(slate, origin) for origin in origins(db)],
                context.run_id,
            ),
        )
    )


def check_evaluation(key: dg.AssetKey, result: dg.AssetCheckResult) -> dg.AssetCheckEvaluation:
    """``result`` (of :func:`verify_results`) as an evaluation an op can log outside the check's own
    op (``context.log_event``): same check, outcome, severity, description and metadata."""
    return dg.AssetCheckEvaluation(
        asset_key=key,
        check_name=str(result.check_name),
        passed=result.passed,
        severity=result.severity,
        description=result.description,
        metadata=dict(result.metadata or {}),
        blocking=False,
    )


def build_database_checks(config: SlateOpsConfig, naming: Naming = DEFAULT) -> list[dg.AssetChecksDefinition]:
    """One :func:`build_database_check` per configured database."""
    return [build_database_check(db, config, naming) for db in config.databases]


def check_result(key: dg.AssetKey, result: CheckResult) -> dg.AssetCheckResult:
    """``result`` as Dagster reports it: passed, severity, description and the problems as metadata."""
    description = result.description
    if result.problems:
        more = len(result.problems) - 1
        description += f": {result.problems[0]}" + (f" (and {more} more)" if more else "")
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=result.name,
        passed=result.passed,
        severity=_SEVERITY[result.severity],
        description=description,
        metadata={
            "problem_count": dg.MetadataValue.int(len(result.problems)),
            "problems": dg.MetadataValue.md(problems_markdown(result.problems)),
        },
    )


def unverifiable_result(key: dg.AssetKey, check: str, error: Exception) -> dg.AssetCheckResult:
    message = f"cannot verify: {type(error).__name__}: {error}"
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=check,
        passed=False,
        severity=dg.AssetCheckSeverity.ERROR,
        description=message,
        metadata={"error": dg.MetadataValue.text(message)},
    )


def problems_markdown(problems: tuple[str, ...]) -> str:
    """A Markdown list of ``problems`` (the first :data:`PROBLEMS_SHOWN`), or ``none``."""
    if not problems:
        return "none"
    lines = ["- " + _MARKDOWN_SPECIAL.sub(r"\\\1", p) for p in problems[:PROBLEMS_SHOWN]]
    if len(problems) > PROBLEMS_SHOWN:
        lines.append(f"- … and {len(problems) - PROBLEMS_SHOWN} more")
    return "\n".join(lines)
