"""The databases config file that the Dagster definitions are built from.

A YAML file with one entry per database::

    databases:
      - name: demo                       # asset key slate_ops/demo; letters, digits, underscores
        store_url: file:///var/lib/slate # optional: defaults to $SLATE_OPS_STORE, else file://<cwd>/.slate
        path: demo                       # the database's path inside the store
        checkpoint_expiry_dry_run: false # scheduled / sensor-requested expiry only reports
      - name: demo_clone                 # a clone of demo: its asset is downstream of demo's
        store_url: file:///var/lib/slate # a clone lives in its parent's store
        path: demo_clone
        parent: demo                     # optional: the configured database this one is cloned from
        tag_policy:                      # optional: periodic tags (tag_policy_job, tag_policy_schedule)
          create_time: "02:00"           # UTC, when each period starts (default 00:00)
          create_interval_days: 1        # whole days between periods (default 1)
          name_format: auto-%Y-%m-%d     # strftime of the period start; only such tags are managed
          num_retained_max: 30           # keep the newest 30 policy tags (default: no limit)
          expire_after: 90days           # delete policy tags whose period began 90 days ago (default: never)
      - name: demo_low                   # a shard of demo, created by rescale_job (split)
        store_url: file:///var/lib/slate
        path: demo_low
        rescaled_from: [demo]            # optional: the database(s) it was split or merged from

``load_config`` reads the file named by its argument, else by ``$SLATE_OPS_CONFIG``, else the
embedded ``default_databases.yaml`` (one ``demo`` database in the local store). String values may
use ``${VAR}`` or ``${VAR:-default}``, expanded from the environment when the file is loaded.

The models are Dagster ``Config`` classes (frozen pydantic models), so the resource that holds them
shows every database in the UI and validates a launch-time override the same way as the file.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from slate_ops.admin.tag_policy import DEFAULT_NAME_FORMAT, TagPolicy, checked_tag_policy
from slate_ops.errors import ConfigError

CONFIG_ENV = "SLATE_OPS_CONFIG"
"""Names the databases config file; unset means the embedded default."""

STORE_ENV = "SLATE_OPS_STORE"
"""The store URL of every database whose entry has no ``store_url``."""

DEFAULT_CONFIG_NAME = "default_databases.yaml"

_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


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


class DatabaseConfig(dg.Config):
    """One database that Dagster maintains."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=_NAME_PATTERN,
        description="Asset name (key slate_ops/<name>) and the value of the run tag slate_ops/db.",
    )
    store_url: str = Field(
        min_length=1, description="file:///abs/dir, memory://name or s3://bucket/prefix (no secrets)."
    )
    path: str = Field(description="The database's path inside the store.")
    checkpoint_expiry_dry_run: bool = Field(
        default=False,
        description="Scheduled and sensor-requested checkpoint expiry runs only report, never remove.",
    )
    description: str | None = Field(default=None, description="Shown on the database's asset.")
    compaction_l0_threshold: int | None = Field(
        default=None,
        ge=2,
        description="L0 SSTs that make the compaction sensor request a run (the compactor's min_sources); "
        "default: CompactorOptions().min_sources (4).",
    )
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


class SlateOpsConfig(dg.Config):
    """Every configured database; names are unique."""

    model_config = ConfigDict(extra="forbid")

    databases: list[DatabaseConfig] = Field(min_length=1)

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
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read slate_ops config {source}: {exc.strerror or exc}") from exc
    return parse_config(text, source)


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
    missing = _missing_fields(raw, SlateOpsConfig, ())
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
