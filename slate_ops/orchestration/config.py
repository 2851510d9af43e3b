"""The databases config file that the Dagster definitions are built from.

A YAML file with one entry per database; each entry groups its policies (every group and field is
optional, docs/orchestration.md documents them all)::

    databases:
      - name: demo                       # asset key slate_ops/demo; letters, digits, underscores
        store_url: file:///var/lib/slate # optional: defaults to $SLATE_OPS_STORE, else file://<cwd>/.slate
        path: demo                       # the database's path inside the store
        engine: auto                     # auto (detected from its manifest), slate_ops or slatedb
        checkpoints:
          expiry_dry_run: false          # automated checkpoint expiry only reports
          reader_lifetime: 10min         # the checkpoint a DbReader opened by the code location holds
          compaction_lifetime: 15min     # the checkpoint a compaction holds on its input manifest
        compaction:
          l0_threshold: 4                # L0 SSTs that trigger a compaction (the compactor's min_sources)
          executor: local                # or spark (the pyspark resource)
          full: false                    # maintenance runs merge everything into one sorted run
        gc:
          dry_run: false                 # automated GC only reports
          interval_hours: 6              # gc_schedule collects every 6 hours (UTC); null: never
          manifest_min_age: 5min         # also compactions_, wal_, compacted_min_age (>= 2min)
        tag_policy:                      # optional: periodic tags (tag_policy_job, tag_policy_schedule)
          create_time: "02:00"           # UTC, when each period starts (default 00:00)
          num_retained_max: 30           # keep the newest 30 policy tags (default: no limit)
      - name: demo_clone                 # a clone of demo: its asset is downstream of demo's
        store_url: file:///var/lib/slate # a clone lives in its parent's store
        path: demo_clone
        parent: demo
      - name: demo_low                   # a shard of demo, created by rescale_job (split)
        store_url: file:///var/lib/slate
        path: demo_low
        rescaled_from: [demo]

``load_config`` reads the file named by its argument, else by ``$SLATE_OPS_CONFIG``, else the
embedded ``default_databases.yaml`` (one ``demo`` database in the local store). String values may
use ``${VAR}`` or ``${VAR:-default}``, expanded from the environment when the file is loaded. Secrets
never go in the file: a ``store_url`` with credentials is refused, S3 credentials are fields of the
``slate`` resource set with ``dagster.EnvVar`` (:mod:`slate_ops.orchestration.resources`). The flat
fields of earlier versions, ``checkpoint_expiry_dry_run`` and ``compaction_l0_threshold``, are still
read (as ``checkpoints.expiry_dry_run`` and ``compaction.l0_threshold``).

The models are Dagster ``Config`` classes (frozen pydantic models), so the resource that holds them
shows every database in the UI and validates a launch-time override the same way as the file.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

import dagster as dg
import yaml
from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from slate_ops.admin.cost import DISCOVER_INTERVAL_S, GC_INTERVAL_S
from slate_ops.admin.tag_policy import DEFAULT_NAME_FORMAT, TagPolicy, checked_tag_policy
from slate_ops.compaction import CompactorOptions
from slate_ops.config import parse_duration
from slate_ops.engine.options import ReaderOptions
from slate_ops.errors import ConfigError, InvalidStoreUrlError
from slate_ops.gc import ALL_RESOURCES, GcOptions
from slate_ops.layout import MANIFEST_DIR, normalize_db_path, own_directory
from slate_ops.objstore import HARMLESS_OPTIONS, S3_CREDENTIAL_VARIABLES, open_store, redact_url
from slate_ops.objstore.metering import S3_STANDARD, PriceTable
from slate_ops.objstore.url import check_store_url

CONFIG_ENV = "SLATE_OPS_CONFIG"
"""Names the databases config file; unset means the embedded default."""

STORE_ENV = "SLATE_OPS_STORE"
"""The store URL of every database whose entry has no ``store_url``."""

DEFAULT_CONFIG_NAME = "default_databases.yaml"

S3_CREDENTIAL_ENV = {f"s3_{name}": variable for name, variable in S3_CREDENTIAL_VARIABLES.items()}
"""The ``slate`` resource's S3 credential fields and the environment variables they are read from:
the store's own ``SLATE_OPS_S3_*`` (:mod:`slate_ops.objstore.credentials`), so a run whose fields
are unset reads the same variables through the store."""

_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class CheckpointPolicy(dg.Config):
    """A database's checkpoint policy: automated expiry, and the lifetimes of the checkpoints that
    readers and compactions hold."""

    model_config = ConfigDict(extra="forbid")

    expiry_dry_run: bool = Field(
        default=False,
        description="Automated checkpoint expiry (manifest sensor, checkpoint_expiry_schedule, "
        "maintenance runs) only reports, never removes; every GC step (gc_job, gc_schedule, "
        "maintenance_gc) then runs without its checkpoint task.",
    )
    reader_lifetime: str = Field(
        default="10min",
        description="Lifetime of the checkpoint a DbReader opened through the slate resource holds "
        "(ReaderOptions.checkpoint_lifetime; more than twice its 10 s manifest poll).",
    )
    compaction_lifetime: str = Field(
        default="15min",
        description="Lifetime of the checkpoint a compaction holds on the manifest it read "
        "(CompactorOptions.compaction_checkpoint_lifetime): in-flight readers keep its inputs.",
    )

    @model_validator(mode="after")
    def _valid_lifetimes(self) -> CheckpointPolicy:
        self.reader_options()
        parse_duration(self.compaction_lifetime)
        return self

    def reader_options(self) -> ReaderOptions:
        return ReaderOptions(checkpoint_lifetime=parse_duration(self.reader_lifetime))


class CompactionPolicy(dg.Config):
    """A database's compaction policy: when the sensor triggers, where compactions run, how much."""

    model_config = ConfigDict(extra="forbid")

    l0_threshold: int | None = Field(
        default=None,
        ge=2,
        description="L0 SSTs that make the compaction sensor request a run, also the compactor's "
        "min_sources in this database's runs; default CompactorOptions().min_sources (4).",
    )
    executor: Literal["local", "spark"] = Field(
        default="local",
        description="Where this database's compactions run unless a launch says otherwise: local "
        "(threads in the run's process) or spark (the pyspark resource's session).",
    )
    full: bool = Field(
        default=False,
        description="Maintenance runs merge every L0 SST and sorted run into one sorted run (small "
        "databases); otherwise they compact what the size-tiered policy picks.",
    )


class GcPolicy(dg.Config):
    """A database's garbage-collection policy: minimum ages, automated dry runs, schedule."""

    model_config = ConfigDict(extra="forbid")

    dry_run: bool = Field(
        default=False, description="Automated GC (gc_schedule, maintenance runs) only reports, never deletes."
    )
    interval_hours: int | None = Field(
        default=GC_INTERVAL_S // 3600,
        ge=1,
        description="gc_schedule (hourly) collects this database on the UTC hours divisible by this "
        "(counted from the epoch: 6 means 00, 06, 12, 18); null: never (maintenance runs still do).",
    )
    manifest_min_age: str = Field(default="5min", description=".manifest files must be this old (>= 2min).")
    compactions_min_age: str = Field(default="5min", description=".compactions files must be this old.")
    wal_min_age: str = Field(default="5min", description="WAL SSTs must have been unreferenced this long.")
    compacted_min_age: str = Field(default="5min", description="SSTs must have been unreferenced this long.")
    db_delete_grace: str = Field(default="1days", description="Grace period of a soft-destroyed database.")
    delete_wal_fences: bool = Field(default=False, description="Also delete WAL fence objects.")
    health_intervals: int = Field(
        default=3,
        ge=1,
        description="The gc_health check fails when garbage has been eligible for GC, or no GC has "
        "advanced its boundary, for longer than this many GC intervals (interval_hours; null: 24 h).",
    )

    @model_validator(mode="after")
    def _valid_options(self) -> GcPolicy:
        self.options()  # the 2-minute floor and the duration format
        return self

    def options(self, resources: Iterable[str] = ALL_RESOURCES, **overrides: str | bool) -> GcOptions:
        """The :class:`GcOptions` of this policy for ``resources``, with ``overrides`` (op config)."""
        fields: dict[str, Any] = {
            "manifest_min_age": self.manifest_min_age,
            "compactions_min_age": self.compactions_min_age,
            "wal_min_age": self.wal_min_age,
            "compacted_min_age": self.compacted_min_age,
            "db_delete_grace": self.db_delete_grace,
            "delete_wal_fences": self.delete_wal_fences,
        }
        return GcOptions.model_validate({**fields, **overrides, "resources": sorted(resources)})

    def health_options(self) -> GcOptions:
        """The options of the ``gc_health`` check: this policy's min ages, and as the GC's interval
        ``interval_hours`` (unset: 24 h, the daily maintenance run's)."""
        hours = self.interval_hours if self.interval_hours is not None else 24
        return self.options().model_copy(update={"interval": timedelta(hours=hours)})

    def due(self, tick: datetime) -> bool:
        """Whether ``gc_schedule``'s hourly ``tick`` collects this database."""
        if self.interval_hours is None:
            return False
        return int(tick.astimezone(UTC).timestamp() // 3600) % self.interval_hours == 0


class TagPolicyConfig(dg.Config):
    """A database's tag policy: the fields of :class:`slate_ops.admin.TagPolicy` (docs/design/tags.md)."""

    model_config = ConfigDict(extra="forbid")

    create_time: str = Field(default="00:00", description="'hh:mm', UTC: when each period starts.")
    create_interval_days: int = Field(default=1, ge=1, description="Whole days between two periods.")
    name_format: str = Field(
        default=DEFAULT_NAME_FORMAT,
        description="strftime format of a period's start (UTC) giving its tag's name; only tags named "
        "so are the policy's (created, expired, counted).",
    )
    num_retained_max: int | None = Field(
        default=None, ge=1, description="Keep at most this many policy tags, the newest; unset: no limit."
    )
    expire_after: str | None = Field(
        default=None, description='Delete policy tags whose period began this long ago, e.g. "90days".'
    )

    @model_validator(mode="after")
    def _valid_policy(self) -> TagPolicyConfig:
        self.to_policy()  # InvalidArgumentError (a ValueError) names the field
        return self

    def to_policy(self) -> TagPolicy:
        return checked_tag_policy(
            create_time=self.create_time,
            create_interval_days=self.create_interval_days,
            name_format=self.name_format,
            num_retained_max=self.num_retained_max,
            expire_after=self.expire_after,
        )


EngineChoice = Literal["auto", "slate_ops", "slatedb"]
"""A database's ``engine:``: detected from its manifest (``auto``) or forced."""


class DatabaseConfig(dg.Config):
    """One database that Dagster maintains."""

    # A refused store_url is shown redacted by its validator; pydantic would echo it whole.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = Field(
        pattern=_NAME_PATTERN,
        description="Asset name (key slate_ops/<name>) and the value of the run tag slate_ops/db.",
    )
    store_url: str = Field(
        min_length=1, description="file:///abs/dir, memory://name or s3://bucket/prefix (no secrets)."
    )
    path: str = Field(description="The database's path inside the store.")
    engine: EngineChoice = Field(
        default="auto",
        description="Which engine wrote the database: auto (the default: detected from its latest "
        "manifest), slate_ops, or slatedb (SlateDB, through its binding: pip install 'slate_ops[slatedb]').",
    )
    description: str | None = Field(default=None, description="Shown on the database's asset.")
    checkpoints: CheckpointPolicy = Field(
        default=CheckpointPolicy(), description="Checkpoint expiry and the lifetimes of held checkpoints."
    )
    compaction: CompactionPolicy = Field(
        default=CompactionPolicy(), description="Compaction trigger, executor and extent."
    )
    gc: GcPolicy = Field(default=GcPolicy(), description="Garbage collection: min ages, dry run, schedule.")
    parent: str | None = Field(
        default=None,
        description="Name of the configured database this one is a clone of (same store): its asset is "
        "downstream of the parent's, and materializing it creates the clone from the parent's current state.",
    )
    tag_policy: TagPolicyConfig | None = Field(
        default=None,
        description="Create and expire tags periodically (tag_policy_job, tag_policy_schedule); unset: none.",
    )
    rescaled_from: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Names of the configured databases this one was split from (one) or merged from "
        "(several), in the same store: its asset is downstream of theirs. rescale_job creates it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _read_flat_fields(cls, data: Any) -> Any:
        """The flat fields of earlier versions move into their groups."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for flat, group, field in _FLAT_FIELDS:
            if flat not in data:
                continue
            value = data.pop(flat)
            section = data.get(group) or {}
            section = dict(section.model_dump() if isinstance(section, dg.Config) else section)
            if field in section:
                raise ValueError(f"{flat} and {group}.{field} both set; keep only {group}.{field}")
            section[field] = value
            data[group] = section
        return data

    @field_validator("store_url")
    @classmethod
    def _no_credentials(cls, url: str) -> str:
        return checked_store_url(url)

    @field_validator("path")
    @classmethod
    def _valid_path(cls, path: str) -> str:
        """A database path that :func:`~slate_ops.layout.normalize_db_path` accepts (no reserved
        directory name as a component, docs/design/names.md); its InvalidDatabaseNameError names why."""
        normalize_db_path(path)
        return path

    def engine_override(self) -> str | None:
        """``engine`` as ``slate_ops.admin.open`` takes it: None for ``auto`` (detect)."""
        return None if self.engine == "auto" else self.engine

    def compactor_options(self) -> CompactorOptions:
        """The compactor options of this database's runs."""
        lifetime = parse_duration(self.checkpoints.compaction_lifetime)
        if self.compaction.l0_threshold is None:
            return CompactorOptions(compaction_checkpoint_lifetime=lifetime)
        return CompactorOptions(
            min_sources=self.compaction.l0_threshold, compaction_checkpoint_lifetime=lifetime
        )

    def reader_options(self) -> ReaderOptions:
        """The options of a DbReader of this database opened by the code location."""
        return self.checkpoints.reader_options()


_FLAT_FIELDS = (
    ("checkpoint_expiry_dry_run", "checkpoints", "expiry_dry_run"),
    ("compaction_l0_threshold", "compaction", "l0_threshold"),
)
_CREDENTIAL_OPTIONS = ("access_key_id", "secret_access_key", "session_token")


def checked_store_url(url: str) -> str:
    """``url`` if it carries no secret; else a ``ValueError`` (a config error) that shows it only through
    :func:`~slate_ops.objstore.redact_url`.

    Refused: credential options (by decoded name), a user or password in the URL or in an option's URL
    value (``endpoint_url=http://user:pw@host``), and any option other than ``endpoint_url`` and
    ``region`` (an allow-list: a mistyped credential name is refused too, its value never shown).
    """
    fix = (
        f"secrets never go in the config file: set {', '.join(S3_CREDENTIAL_ENV.values())} (the slate "
        "resource reads them with dagster.EnvVar), or use boto3's chain (AWS_* variables, profiles, roles)"
    )
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError(f"store_url {shown!r} is not a valid URL") from None
    try:  # the store's own early checks: a mistyped or unknown scheme fails at load, with its hint
        check_store_url(url)
    except InvalidStoreUrlError as error:
        raise ValueError(f"store_url: {error}") from None
    query = parse_qs(parts.query, keep_blank_values=True)
    given = sorted(set(query) & set(_CREDENTIAL_OPTIONS))
    if given:
        raise ValueError(f"store_url {shown!r} carries credentials ({', '.join(given)}); {fix}")
    if "@" in parts.netloc or any("@" in _netloc(value) for values in query.values() for value in values):
        raise ValueError(f"store_url {shown!r} carries a user or password; {fix}")
    unknown = sorted(set(query) - HARMLESS_OPTIONS)
    if unknown and "://" in url:
        raise ValueError(
            f"store_url {shown!r} has option(s) a store URL does not take ({', '.join(unknown)}); "
            f"allowed: {', '.join(sorted(HARMLESS_OPTIONS))}; {fix}"
        )
    return url


def _netloc(value: str) -> str:
    try:
        return urlsplit(value).netloc
    except ValueError:
        return "@"  # unparseable: refused as if it carried userinfo


class DiscoverConfig(dg.Config):
    """Where more databases are found by listing: every path under ``prefix`` in ``store_url`` that
    holds a ``manifest/`` (:func:`slate_ops.admin.fleet.discover_databases`)."""

    # A refused store_url is shown redacted by its validator; pydantic would echo it whole.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    store_url: str = Field(min_length=1, description="The store to list (no secrets); default: as databases.")
    prefix: str = Field(default="", description="List under this path; empty: the whole store.")
    interval_minutes: float = Field(
        default=DISCOVER_INTERVAL_S / 60,
        ge=0,
        description="How long a sensor reuses its last listing (kept in its cursor) before it lists "
        "again: a new database is found, and a deleted one dropped, within it; 0: every tick.",
    )

    @field_validator("store_url")
    @classmethod
    def _no_credentials(cls, url: str) -> str:
        return checked_store_url(url)

    @field_validator("prefix")
    @classmethod
    def _valid_prefix(cls, prefix: str) -> str:
        normalize_db_path(prefix)  # a prefix is a path: the same rules (docs/design/names.md)
        return prefix


def discovered_path(name: str, prefix: str) -> str | None:
    """The path under ``prefix`` whose :func:`discovered_name` is ``name`` and is ``name`` itself
    (``db_007`` under ``fleet``: ``fleet/db_007``), which discovery prefers when several paths share
    a name; None if ``name`` cannot be a path's own name there."""
    path = f"{prefix.strip('/')}/{name}" if prefix.strip("/") else name
    try:
        normalized = normalize_db_path(path)
    except ValueError:
        return None
    return normalized if discovered_name(normalized, prefix) == name else None


def discovered_name(path: str, prefix: str) -> str | None:
    """The name of the database discovered at ``path`` under ``prefix``: the rest of the path, every
    character but letters, digits and ``_`` made ``_``, and ``_`` first if it starts with a digit
    (``fleet/db-007`` under ``fleet`` is ``db_007``); None for the prefix itself."""
    rest = path.strip("/")
    root = prefix.strip("/")
    if root and (rest == root or rest.startswith(root + "/")):
        rest = rest[len(root) :].strip("/")
    if not rest:
        return None
    name = re.sub(r"[^A-Za-z0-9_]", "_", rest)
    return "_" + name if name[0].isdigit() else name


def _price(description: str, default: float) -> Any:
    return Field(default=default, ge=0, description=f"Dollars {description}.")


class PricesConfig(dg.Config):
    """The price table of the cost views (``prices:``): :class:`~slate_ops.objstore.metering.PriceTable`'s
    fields; default S3 Standard in us-east-1 (https://aws.amazon.com/s3/pricing/)."""

    model_config = ConfigDict(extra="forbid")

    get_per_1000: float = _price("per 1,000 GET requests", S3_STANDARD.get_per_1000)
    head_per_1000: float = _price("per 1,000 HEAD requests", S3_STANDARD.head_per_1000)
    put_per_1000: float = _price("per 1,000 PUT requests", S3_STANDARD.put_per_1000)
    list_per_1000: float = _price(
        "per 1,000 LIST requests (one per page of 1,000 keys)", S3_STANDARD.list_per_1000
    )
    delete_per_1000: float = _price("per 1,000 DELETE requests", S3_STANDARD.delete_per_1000)
    read_per_gb: float = _price("per GB read", S3_STANDARD.read_per_gb)
    written_per_gb: float = _price("per GB written", S3_STANDARD.written_per_gb)
    source: str = Field(
        default=S3_STANDARD.source, description="Where the prices come from (shown with them)."
    )

    def table(self) -> PriceTable:
        """These prices as a :class:`PriceTable`."""
        return PriceTable(**self.model_dump())


class SlateOpsConfig(dg.Config):
    """Every configured database (names are unique), and where more are discovered."""

    # A refused store_url is shown redacted by its validator; pydantic would echo it whole.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    discover: DiscoverConfig | None = Field(
        default=None,
        description="List this store and prefix for more databases, which get the default policies.",
    )
    databases: list[DatabaseConfig] = Field(default_factory=list)
    prices: PricesConfig = Field(
        default_factory=PricesConfig, description="The price table of the cost views (default S3 Standard)."
    )
    cost_window_days: float = Field(
        default=7, gt=0, description="The recent window the cost views average requests per day over."
    )

    @field_validator("databases")
    @classmethod
    def _some_database(cls, databases: list[DatabaseConfig], info: ValidationInfo) -> list[DatabaseConfig]:
        if not databases and info.data.get("discover") is None:
            raise ValueError("list at least 1 database, or set discover")
        return databases

    @field_validator("databases")
    @classmethod
    def _unique_names(cls, databases: list[DatabaseConfig]) -> list[DatabaseConfig]:
        names = [d.name for d in databases]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"database names must be unique; repeated: {', '.join(duplicates)}")
        return databases

    @field_validator("databases")
    @classmethod
    def _parents_exist(cls, databases: list[DatabaseConfig]) -> list[DatabaseConfig]:
        """A clone's ``parent`` names another entry in the same store, and parents form no cycle."""
        by_name = {d.name: d for d in databases}
        for db in databases:
            _check_rescale_sources(db, by_name)
            if db.parent is None:
                continue
            parent = by_name.get(db.parent)
            if parent is None:
                raise ValueError(
                    f"database {db.name!r} names parent {db.parent!r}, which is not configured; "
                    f"configured: {', '.join(by_name)}"
                )
            if parent.store_url != db.store_url:
                raise ValueError(
                    f"clone {db.name!r} must be in its parent {db.parent!r}'s store ({parent.store_url}), "
                    "since it reads the parent's SSTs in place"
                )
            seen = [db.name]
            while parent is not None:
                if parent.name in seen:
                    raise ValueError(f"databases' parents form a cycle: {' -> '.join([*seen, parent.name])}")
                seen.append(parent.name)
                parent = by_name.get(parent.parent) if parent.parent is not None else None
        return databases

    def database(self, name: str) -> DatabaseConfig:
        """The database called ``name``; :class:`ConfigError` listing the known names otherwise."""
        for db in self.databases:
            if db.name == name:
                return db
        known = ", ".join(d.name for d in self.databases)
        raise ConfigError(f"no database named {name!r} is configured; configured: {known}")


def _check_rescale_sources(db: DatabaseConfig, by_name: dict[str, DatabaseConfig]) -> None:
    """``rescaled_from`` names other configured databases in the same store (not with ``parent``)."""
    if db.rescaled_from is None:
        return
    if db.parent is not None:
        raise ValueError(
            f"database {db.name!r} sets both parent and rescaled_from; a database has one origin"
        )
    for name in db.rescaled_from:
        source = by_name.get(name)
        if source is None or name == db.name:
            raise ValueError(
                f"database {db.name!r} is rescaled_from {name!r}, which is not another configured database; "
                f"configured: {', '.join(by_name)}"
            )
        if source.store_url != db.store_url:
            raise ValueError(
                f"database {db.name!r} must be in the store of {name!r} ({source.store_url}): split and "
                "merge reference the sources' SSTs in place"
            )


def default_store_url() -> str:
    """``$SLATE_OPS_STORE`` if set, else ``file://<cwd>/.slate``."""
    return os.environ.get(STORE_ENV) or Path.cwd().joinpath(".slate").absolute().as_uri()


def load_config(path: str | None = None) -> SlateOpsConfig:
    """Load ``path``, else ``$SLATE_OPS_CONFIG``, else the embedded default.

    Raises :class:`ConfigError` naming the file and the offending field.
    """
    path = path or os.environ.get(CONFIG_ENV) or None
    if path is None:
        source = f"<embedded slate_ops/orchestration/{DEFAULT_CONFIG_NAME}>"
        text = (
            resources.files(__package__ or "slate_ops.orchestration")
            .joinpath(DEFAULT_CONFIG_NAME)
            .read_text()
        )
        return demo_fleet(parse_config(text, source))
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read slate_ops config {source}: {exc.strerror or exc}") from exc
    return parse_config(text, source)


def slatedb_demo_available(store_url: str | None = None) -> bool:
    """Whether the demo can have its SlateDB database: SlateDB's binding is installed
    (``pip install 'slate_ops[slatedb]'``; looked up, not imported) and the demo's store
    (``store_url``, default :func:`default_store_url`) is a local directory or S3, the stores the
    binding opens (``.ci/demo`` writes that database with SlateDB's own ``Db`` there)."""
    url = store_url if store_url is not None else default_store_url()
    return url.startswith(("file://", "s3://")) and importlib.util.find_spec("slatedb") is not None


def demo_fleet(config: SlateOpsConfig) -> SlateOpsConfig:
    """The embedded default ``config``, with its ``engine: slatedb`` databases only once SlateDB
    wrote them (:func:`slatedb_demo_available`, and their manifests exist: a directory lookup, or
    on S3 one LIST, with the store's usual credentials; a store that cannot be listed leaves them
    out): slate_ops never creates a SlateDB database, so before ``.ci/demo`` wrote it, the demo fleet
    is the slate_ops databases alone and ``slate_ops_databases_job`` succeeds."""
    kept = [db for db in config.databases if db.engine != "slatedb" or _slatedb_demo_written(db)]
    if len(kept) == len(config.databases):
        return config
    return config.model_copy(update={"databases": kept})


def _slatedb_demo_written(db: DatabaseConfig) -> bool:
    if not slatedb_demo_available(db.store_url):
        return False
    if db.store_url.startswith("file://"):
        root = Path(unquote(urlsplit(db.store_url).path))
        return root.joinpath(normalize_db_path(db.path), MANIFEST_DIR).is_dir()
    try:  # S3: one LIST of the database's manifests
        store = open_store(db.store_url)
        return next(iter(store.list(own_directory(db.path, MANIFEST_DIR))), None) is not None
    except Exception:  # no credentials, no bucket: the demo never wrote it there
        return False


def parse_config(text: str, source: str = "<string>") -> SlateOpsConfig:
    """Validate YAML ``text``; ``source`` names it in error messages."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"slate_ops config {source} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(
            f"slate_ops config {source} must be a mapping with a 'databases' list, got {type(raw).__name__}"
        )
    raw = _expand(raw, source, ())
    # Dagster's Config turns a missing field into None ("Input should be a valid string"), so
    # required fields are checked here to report them as missing.
    missing = [] if isinstance(raw.get("discover"), dict) else _missing_fields(raw, SlateOpsConfig, ())
    if "databases" not in raw and not isinstance(raw.get("discover"), dict):
        missing.append("databases")
    discover = raw.get("discover")
    if isinstance(discover, dict) and discover.get("store_url") is None:
        discover["store_url"] = default_store_url()
    databases = raw.get("databases")
    if isinstance(databases, list):
        for i, entry in enumerate(databases):
            if isinstance(entry, dict):
                if entry.get("store_url") is None:
                    entry["store_url"] = default_store_url()
                missing += _missing_fields(entry, DatabaseConfig, ("databases", i))
    problems = [f"{loc}: field required" for loc in missing]
    try:
        config = SlateOpsConfig.model_validate(raw)
    except ValidationError as exc:
        for error in exc.errors():
            loc = ".".join(str(part) for part in error["loc"])
            if loc not in missing:
                problems.append(f"{loc or '<top level>'}: {error['msg']}")
    if problems:
        raise ConfigError(f"invalid slate_ops config {source}: {'; '.join(problems)}")
    return config


def _missing_fields(raw: dict[str, Any], model: type[dg.Config], loc: tuple[object, ...]) -> list[str]:
    return [
        ".".join(str(part) for part in (*loc, name))
        for name, field in model.model_fields.items()
        if field.is_required() and raw.get(name) is None
    ]


def _expand(value: Any, source: str, loc: tuple[object, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _expand(v, source, (*loc, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, source, (*loc, i)) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = os.environ.get(name)
        if found is not None:
            return found
        if default is not None:
            return default
        field = ".".join(str(part) for part in loc)
        raise ConfigError(
            f"invalid slate_ops config {source}: {field}: environment variable {name} is not set "
            f"(write ${{{name}:-default}} to give a default)"
        )

    return _ENV_REF.sub(substitute, value)
