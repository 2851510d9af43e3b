"""slate_ops as a Dagster Component: ``type: slate_ops.orchestration.FleetComponent`` in a ``defs.yaml``.

A thin adapter over :func:`slate_ops.orchestration.build_definitions`: the YAML's attributes are the
fleet (``databases`` and ``discover``, the same fields and policy groups as the fleet config file, or
``config_file:`` naming such a file) and the builder's options (``jobs``, ``schedules``, ``sensors``,
``resource_keys``, ``prefix``, ``resources``)::

    type: slate_ops.orchestration.FleetComponent
    attributes:
      databases:
        - name: orders
          path: orders
          store_url: s3://lake/slate
          tag_policy: {create_time: "02:00", num_retained_max: 30}
      jobs: [maintenance_job, compaction_job]
      resource_keys: {slate: slate_ops, pyspark: slate_ops_pyspark}
      prefix: ""

Override points are methods of a subclass (``get_asset_spec``, ``run_step``), wired to the
builder's :class:`~slate_ops.orchestration.naming.Hooks`. ``dg scaffold defs
slate_ops.orchestration.FleetComponent <path>`` writes a ``defs.yaml`` with the demo fleet
(:class:`FleetComponentScaffolder`). docs/orchestration.md ("Dagster Component") documents it.

Loading the component does not list the store: only the configured databases get assets; databases
found by ``discover`` become partitions through the partitions sensor, at run time. So there is no
load-time inventory to cache, and the component is a plain (not state-backed) component.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import dagster as dg
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from slate_ops.errors import ConfigError
from slate_ops.orchestration.builder import build_definitions
from slate_ops.orchestration.config import (
    DatabaseConfig,
    DiscoverConfig,
    SlateOpsConfig,
    load_config,
    parse_config,
)
from slate_ops.orchestration.naming import Hooks, ResourceKeys, StepCall

_DEFAULT_KEYS = ResourceKeys()


class FleetDatabase(DatabaseConfig):
    """One database of the component's fleet: every field and policy group of a ``databases`` entry
    of the fleet config file (docs/orchestration.md, "The config file"); ``store_url`` may be left out
    (``$SLATE_OPS_STORE``, else ``file://<working directory>/.slate``)."""

    store_url: str | None = Field(  # type: ignore[assignment]
        default=None,
        min_length=1,
        description="file:///abs/dir, memory://name or s3://bucket/prefix (no secrets); "
        "default: $SLATE_OPS_STORE, else file://<working directory>/.slate.",
    )

    @field_validator("store_url")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:  # type: ignore[override]
        """Checked when the fleet is built (:func:`~slate_ops.orchestration.config.parse_config`),
        whose error shows the URL redacted: Dagster's schema errors echo their input."""
        return url


class FleetDiscover(DiscoverConfig):
    """Where more databases are found by listing (``discover`` of the fleet config file);
    ``store_url`` may be left out, as for databases."""

    store_url: str | None = Field(  # type: ignore[assignment]
        default=None,
        min_length=1,
        description="The store to list (no secrets); default: as databases.",
    )


class FleetResourceKeys(BaseModel):
    """The resource keys the fleet's definitions require (choose keys your project does not use)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slate: str = Field(default=_DEFAULT_KEYS.slate, description="The SlateDatabasesResource.")
    pyspark: str = Field(
        default=_DEFAULT_KEYS.pyspark, description="The pyspark resource (Spark compaction)."
    )


class FleetPrices(BaseModel):
    """The price table of the cost views (``prices:``): dollars per 1,000 requests of each kind and
    per GB; checked as :class:`~slate_ops.orchestration.config.PricesConfig` (non-negative) when the
    fleet is built. Omitted fields: S3 Standard's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    get_per_1000: float | None = None
    head_per_1000: float | None = None
    put_per_1000: float | None = None
    list_per_1000: float | None = None
    delete_per_1000: float | None = None
    read_per_gb: float | None = None
    written_per_gb: float | None = None
    source: str | None = Field(default=None, description="Where the prices come from (shown with them).")


def _resolve_databases(context: dg.ResolutionContext, value: Any) -> list[FleetDatabase] | None:
    """The schema-checked entries with ``{{ ... }}`` templates (e.g. ``{{ env.STORE }}``) resolved."""
    if value is None:
        return None
    return [
        FleetDatabase.model_validate(context.resolve_value(db.model_dump(exclude_unset=True))) for db in value
    ]


def _resolve_discover(context: dg.ResolutionContext, value: Any) -> FleetDiscover | None:
    if value is None:
        return None
    return FleetDiscover.model_validate(context.resolve_value(value.model_dump(exclude_unset=True)))


class FleetComponentScaffolder(dg.Scaffolder):
    """Writes a ``defs.yaml`` holding the demo fleet (the embedded default's four databases), with a
    comment per field to edit."""

    def scaffold(self, request: dg.ScaffoldRequest[Any]) -> None:
        if request.scaffold_format != "yaml":
            dg.scaffold_component(request)
            return
        request.target_path.mkdir(parents=True, exist_ok=True)
        (request.target_path / "defs.yaml").write_text(
            SCAFFOLD_TEMPLATE.format(type_name=request.type_name), encoding="utf-8"
        )


SCAFFOLD_TEMPLATE = """\
type: {type_name}

attributes:
  # The fleet: the databases slate_ops maintains (the fields of the fleet config file,
  # docs/orchestration.md "The config file"), or instead `config_file: fleet.yaml` naming such a
  # file (relative to this folder). Without store_url a database lives in $SLATE_OPS_STORE,
  # else file://<working directory>/.slate.
  databases:
    - name: demo
      path: demo
      description: The demo database (run .ci/demo in slate_ops' repository, or write to it).
      compaction:
        l0_threshold: 4
        executor: local
      gc:
        interval_hours: 6
      tag_policy:
        create_time: "00:00"
        num_retained_max: 7
    - name: demo_clone
      path: demo_clone
      parent: demo
  # discover: {{store_url: "s3://lake/slate", prefix: tenants}}   # list a store for more databases

  # Which of slate_ops' jobs, schedules and sensors to include (unprefixed names); omit for all.
  # jobs: [maintenance_job, compaction_job, gc_job]

  # The resource keys slate_ops' definitions use; pick keys your project does not use.
  resource_keys:
    slate: slate_ops
    pyspark: slate_ops_pyspark

  # Put in front of every job, schedule, sensor, partitions definition and asset key
  # (two fleets in one deployment), e.g. "eu_".
  prefix: ""
"""


@dg.scaffold_with(FleetComponentScaffolder)
class FleetComponent(dg.Component, dg.Model, dg.Resolvable):
    """A fleet of slate_ops databases maintained by Dagster: the databases' assets and checks, the
    maintenance, compaction, GC, checkpoint, tag, clone and rescale jobs with their schedules and
    sensors, partitioned by database, and the resources they use.

    Subclass it to override :meth:`get_asset_spec` (the asset of each database) or
    :meth:`run_step` (every op's step), and name the subclass as ``type:`` in ``defs.yaml``.
    """

    config_file: str | None = Field(
        default=None,
        description="A fleet config file (YAML: databases, discover), relative to this defs.yaml's "
        "folder; instead of databases/discover. Neither set: $SLATE_OPS_CONFIG, else slate_ops' "
        "embedded demo fleet.",
    )
    # The YAML schema is the fleet config file's models (model_field_type); Dagster's resolution
    # cannot walk their constrained fields, so the Python-side type is Any and the resolvers return
    # the schema-checked, template-resolved models.
    databases: Annotated[
        list[Any] | None,
        dg.Resolver(_resolve_databases, model_field_type=list[FleetDatabase] | None),
    ] = Field(default=None, description="The databases (each with its policies), as in a fleet config file.")
    discover: Annotated[
        Any,
        dg.Resolver(_resolve_discover, model_field_type=FleetDiscover | None),
    ] = Field(default=None, description="List this store and prefix for more databases (default policies).")
    jobs: list[str] | None = Field(
        default=None, description="slate_ops' jobs to include (unprefixed names); omitted: all."
    )
    schedules: list[str] | None = Field(
        default=None, description="Schedules to include (of the included jobs); omitted: all."
    )
    sensors: list[str] | None = Field(default=None, description="Sensors to include; omitted: all.")
    resource_keys: FleetResourceKeys = Field(
        default=FleetResourceKeys(), description="The resource keys of slate_ops' definitions."
    )
    prefix: str = Field(
        default="",
        description="Prefix of every job, schedule, sensor, partitions definition, check op, asset key "
        "and group name (e.g. 'eu_'); empty: none.",
    )
    resources: bool = Field(
        default=True,
        description="Bind both resources; false: your project binds the two resource keys itself.",
    )
    prices: FleetPrices | None = Field(
        default=None,
        description="The price table of the cost views (dollars per 1,000 requests of each kind, per GB); "
        "omitted: the fleet config's, by default S3 Standard.",
    )
    cost_window_days: float | None = Field(
        default=None,
        description="The window the cost views average over, in days (> 0); omitted: the fleet config's (7).",
    )

    def fleet_config(self, context: dg.ComponentLoadContext | None = None) -> SlateOpsConfig:
        """The fleet this component maintains: ``config_file``, else ``databases``/``discover``, else
        :func:`~slate_ops.orchestration.config.load_config`; with the component's ``prices`` and
        ``cost_window_days`` when set. Raises :class:`ConfigError` naming the component's
        ``defs.yaml`` and the offending field."""
        config = self._fleet(context)
        costs: dict[str, Any] = {}
        if self.prices is not None:
            costs["prices"] = self.prices.model_dump(exclude_none=True)
        if self.cost_window_days is not None:
            costs["cost_window_days"] = self.cost_window_days
        if not costs:
            return config
        try:
            return SlateOpsConfig.model_validate({**config.model_dump(), **costs})
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in error.errors()
            )
            raise ConfigError(f"slate_ops FleetComponent {_source(context)}: {problems}") from None

    def _fleet(self, context: dg.ComponentLoadContext | None) -> SlateOpsConfig:
        source = _source(context)
        if self.config_file is not None:
            if self.databases is not None or self.discover is not None:
                raise ConfigError(
                    f"slate_ops FleetComponent {source}: set either config_file or databases/discover, "
                    "not both"
                )
            path = Path(self.config_file)
            if not path.is_absolute() and context is not None:
                path = context.path / path
            return load_config(str(path))
        if self.databases is None and self.discover is None:
            return load_config()
        raw: dict[str, Any] = {}
        if self.discover is not None:
            raw["discover"] = _plain(self.discover)
        raw["databases"] = [_plain(db) for db in self.databases or []]
        return parse_config(yaml.safe_dump(raw, sort_keys=False), source)

    def get_asset_spec(self, database: DatabaseConfig, default_spec: dg.AssetSpec) -> dg.AssetSpec:
        """The asset spec of ``database``'s asset; override to change it (key, owners, kinds, tags,
        ...). ``default_spec`` is slate_ops' spec. The database's checks follow the returned key."""
        return default_spec

    def run_step(self, call: StepCall) -> Any:
        """Runs one op's step (``call.op_name`` on ``call.database``); override to wrap it (logging,
        metrics, an approval gate). Must return ``call.run()``'s result."""
        return call.run()

    def hooks(self) -> Hooks:
        """The builder's hooks: the methods a subclass overrides (none: the builder's defaults)."""
        cls = type(self)
        overrides_spec = cls.get_asset_spec is not FleetComponent.get_asset_spec
        overrides_step = cls.run_step is not FleetComponent.run_step
        return Hooks(
            asset_spec=self.get_asset_spec if overrides_spec else None,
            run_step=self.run_step if overrides_step else None,
        )

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return build_definitions(
            self.fleet_config(context),
            resource_keys=ResourceKeys(slate=self.resource_keys.slate, pyspark=self.resource_keys.pyspark),
            prefix=self.prefix,
            jobs=self.jobs,
            schedules=self.schedules,
            sensors=self.sensors,
            resources=self.resources,
            hooks=self.hooks(),
        )


def _plain(value: Any) -> Any:
    """A model as the fields it was given (a dict from Python stays as it is)."""
    return value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else value


def _source(context: dg.ComponentLoadContext | None) -> str:
    return str(context.path / "defs.yaml") if context is not None else "<FleetComponent>"


__all__ = [
    "FleetComponent",
    "FleetComponentScaffolder",
    "FleetDatabase",
    "FleetDiscover",
    "FleetResourceKeys",
]
