"""Discovery reused across ticks: a sensor keeps its last discovery listing in its cursor
(:class:`DiscoveryListing`) and lists the ``discover`` prefix again only once the listing is
``discover.interval_minutes`` old (:func:`fleet_with_listing`), so a tick within the interval sends
no discovery LIST. Dagster may evaluate a sensor's ticks in different processes; the cursor is what
survives between them.

In the cursor: ``"discovered": {"at": <epoch s>, "where": <digest of the discover store and prefix>,
"paths": [...], "objects": <n>}``; a listing of another store or prefix (the config changed) is not
reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass

from slate_ops.errors import InvalidArgumentError
from slate_ops.orchestration.config import DatabaseConfig, DiscoverConfig
from slate_ops.orchestration.resources import SlateDatabasesResource

CURSOR_KEY = "discovered"
"""The key of the listing in a sensor's JSON cursor."""


def discover_digest(discover: DiscoverConfig) -> str:
    """A short digest of what a listing lists (store and prefix): another one is listed afresh."""
    return hashlib.sha256(f"{discover.store_url}\n{discover.prefix}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class DiscoveryListing:
    """The database ``paths`` one discovery LIST of the prefix ``where`` found at ``at`` (epoch
    seconds, the start of its tick), and how many ``objects`` it paged through."""

    at: float
    where: str
    paths: tuple[str, ...]
    objects: int = 0

    def reusable(self, now: float, discover: DiscoverConfig) -> bool:
        """Whether a tick at ``now`` may use this listing instead of a LIST: same store and prefix,
        less than ``discover.interval_minutes`` old."""
        return self.where == discover_digest(discover) and 0 <= now - self.at < discover.interval_minutes * 60

    def to_json(self) -> dict[str, object]:
        return {"at": self.at, "where": self.where, "paths": list(self.paths), "objects": self.objects}

    @classmethod
    def from_json(cls, raw: object) -> DiscoveryListing:
        """The listing ``raw`` describes; :class:`InvalidArgumentError` if it is not one."""
        if not isinstance(raw, dict):
            raise InvalidArgumentError(f"a discovery listing must be an object, got {raw!r}")
        at, where, paths, objects = raw.get("at"), raw.get("where"), raw.get("paths"), raw.get("objects", 0)
        if (
            not isinstance(at, int | float)
            or not isinstance(where, str)
            or not isinstance(paths, list)
            or not all(isinstance(p, str) for p in paths)
            or not isinstance(objects, int)
        ):
            raise InvalidArgumentError(f"not a discovery listing: {raw!r}")
        return cls(float(at), where, tuple(paths), objects)

    @classmethod
    def in_cursor(cls, text: str | None) -> DiscoveryListing | None:
        """The listing in the JSON cursor ``text``; None when it holds none (a cursor of a format
        before this one) or cannot be read (the tick lists afresh)."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            return cls.from_json(raw[CURSOR_KEY]) if isinstance(raw, dict) and CURSOR_KEY in raw else None
        except (ValueError, InvalidArgumentError):
            return None


def fleet_with_listing(
    slate: SlateDatabasesResource, log: logging.Logger, cached: DiscoveryListing | None
) -> tuple[list[DatabaseConfig], DiscoveryListing | None]:
    """The fleet (configured, then discovered databases) and the listing to keep for the next
    tick: ``cached`` while it is reusable (no request), else a new LIST. If that LIST fails, the
    configured databases with a warning, and no listing (the next tick lists again)."""
    discover = slate.config.discover
    if discover is None:
        return list(slate.config.databases), None
    now = slate.clock().now()
    if cached is not None and cached.reusable(now, discover):
        return slate.fleet(cached.paths), cached
    try:
        found = slate.discover()
    except Exception as exc:
        log.warning(f"discovery failed, using the configured databases only: {type(exc).__name__}: {exc}")
        return list(slate.config.databases), None
    listing = DiscoveryListing(now, discover_digest(discover), found.paths, found.objects)
    return slate.fleet(listing.paths), listing
