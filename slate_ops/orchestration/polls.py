"""A manifest sensor's cursor: the manifest each database was last handled at, and the requests its
polls made since its window began (:class:`SensorCursor`).

A sensor ticks every 30 s; one event per tick and database would flood the event log. So each tick
adds its metered poll requests to the database's :class:`PollWindow` in the cursor (which the sensor
stores every tick anyway, a few hundred bytes per database), and a window at least
:data:`POLL_WINDOW_S` old is handed out (:meth:`SensorCursor.close_windows`) for one observation and
started again: at most one event per database and hour, with every request counted.

A poll of a database whose manifest the cursor names is a GET probe of the next manifest when
:meth:`SensorCursor.may_probe` allows it, else a LIST (docs/orchestration.md, "What each database
costs"): the cursor keeps, per database, when a poll last confirmed that manifest the latest
(:class:`Confirmed`).

The cursor is JSON ``{"manifests": {"<db>": <manifest id>}, "polls": {"<db>": {"since": <epoch s>,
"polls": <n>, "counts": {<RequestCounts.to_dict()>}}}, "confirmed": {"<db>": {"manifest": <id>,
"at": <epoch s>, "listed": <epoch s>, "where": <digest of its store and path>}}, "discovered":
{<the fleet's last discovery listing: discovery.DiscoveryListing>}}``. The formats before,
``{"<db>": <manifest id>}`` and those without ``confirmed`` or ``discovered``, still parse (nothing
confirmed yet: the next poll LISTs; no listing: the tick discovers).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from slate_ops.admin.cost import SENSOR_LIST_INTERVAL_S, SENSOR_PROBE_MAX_AGE_S
from slate_ops.errors import InvalidArgumentError
from slate_ops.objstore.metering import ZERO, RequestCounts
from slate_ops.orchestration.discovery import CURSOR_KEY, DiscoveryListing

POLL_WINDOW_S = 3600.0
"""How long a database's poll requests accumulate before they are recorded (one observation)."""


@dataclass(frozen=True)
class PollWindow:
    """The requests of ``polls`` polls of one database since ``since`` (epoch seconds)."""

    since: float
    polls: int = 0
    counts: RequestCounts = ZERO

    def add(self, counts: RequestCounts) -> PollWindow:
        return PollWindow(self.since, self.polls + 1, self.counts + counts)

    def to_json(self) -> dict[str, object]:
        return {"since": self.since, "polls": self.polls, "counts": self.counts.to_dict()}

    @classmethod
    def from_json(cls, raw: object) -> PollWindow:
        """The window ``raw`` describes; :class:`InvalidArgumentError` if it is not one."""
        if not isinstance(raw, dict):
            raise InvalidArgumentError(f"a poll window must be an object, got {raw!r}")
        since, polls, counts = raw.get("since"), raw.get("polls"), raw.get("counts")
        if not isinstance(since, int | float) or not isinstance(polls, int) or not isinstance(counts, dict):
            raise InvalidArgumentError(f"not a poll window: {raw!r}")
        return cls(float(since), polls, RequestCounts.from_dict(counts))


def location_digest(store_url: str, path: str) -> str:
    """A short digest of where a database lives: a confirmation holds only for the same place (a
    config that moves a name to another store or path LISTs it again)."""
    return hashlib.sha256(f"{store_url}\n{path}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Confirmed:
    """A poll's proof that ``manifest`` was the latest of the database at ``where``
    (:func:`location_digest`): last at ``at`` (a LIST or a probe miss), last by LIST at ``listed``
    (epoch seconds, each the start of its tick)."""

    manifest: int
    at: float
    listed: float
    where: str = ""

    def to_json(self) -> dict[str, object]:
        return {"manifest": self.manifest, "at": self.at, "listed": self.listed, "where": self.where}

    @classmethod
    def from_json(cls, raw: object) -> Confirmed:
        """The confirmation ``raw`` describes; :class:`InvalidArgumentError` if it is not one."""
        if not isinstance(raw, dict):
            raise InvalidArgumentError(f"a confirmation must be an object, got {raw!r}")
        manifest, at, listed, where = raw.get("manifest"), raw.get("at"), raw.get("listed"), raw.get("where")
        if (
            not isinstance(manifest, int)
            or not isinstance(at, int | float)
            or not isinstance(listed, int | float)
            or not isinstance(where, str)
        ):
            raise InvalidArgumentError(f"not a confirmation: {raw!r}")
        return cls(manifest, float(at), float(listed), where)


@dataclass
class SensorCursor:
    """What a manifest sensor keeps between ticks: :attr:`manifests` handled, :attr:`polls`,
    :attr:`confirmed` and the fleet's :attr:`discovered` listing (set by the tick)."""

    manifests: dict[str, int] = field(default_factory=dict)
    polls: dict[str, PollWindow] = field(default_factory=dict)
    confirmed: dict[str, Confirmed] = field(default_factory=dict)
    discovered: DiscoveryListing | None = None

    @classmethod
    def parse(cls, text: str | None, log: logging.Logger, names: Iterable[str]) -> SensorCursor:
        """The cursor ``text`` (either format), restricted to ``names`` (the fleet); an unreadable
        one counts as empty, with a warning."""
        if not text:
            return cls()
        keep = set(names)
        try:
            raw = json.loads(text)
            if isinstance(raw, dict) and all(isinstance(v, int) for v in raw.values()):  # the old format
                return cls({str(k): v for k, v in raw.items() if str(k) in keep})
            if isinstance(raw, dict) and set(raw) <= {"manifests", "polls", "confirmed", CURSOR_KEY}:
                manifests, polls = raw.get("manifests", {}), raw.get("polls", {})
                confirmed = raw.get("confirmed", {})
                if (
                    isinstance(manifests, dict)
                    and isinstance(polls, dict)
                    and isinstance(confirmed, dict)
                    and all(isinstance(v, int) for v in manifests.values())
                ):
                    return cls(
                        {str(k): v for k, v in manifests.items() if str(k) in keep},
                        {str(k): PollWindow.from_json(v) for k, v in polls.items() if str(k) in keep},
                        {str(k): Confirmed.from_json(v) for k, v in confirmed.items() if str(k) in keep},
                        DiscoveryListing.in_cursor(text),
                    )
        except (ValueError, InvalidArgumentError):
            pass
        log.warning(f"ignoring unreadable cursor {text!r}; observing every database again")
        return cls()

    def dumps(self) -> str:
        cursor: dict[str, object] = {
            "manifests": self.manifests,
            "polls": {name: window.to_json() for name, window in sorted(self.polls.items())},
            "confirmed": {name: c.to_json() for name, c in sorted(self.confirmed.items())},
        }
        if self.discovered is not None:
            cursor[CURSOR_KEY] = self.discovered.to_json()
        return json.dumps(cursor, sort_keys=True)

    def may_probe(self, name: str, known_id: int | None, now: float, where: str) -> bool:
        """Whether the poll of ``name`` (at ``where``) at ``now`` may be a GET probe of manifest
        ``known_id + 1`` rather than a LIST: ``known_id`` was confirmed the latest there less than
        :data:`~slate_ops.admin.cost.SENSOR_PROBE_MAX_AGE_S` ago (60 s: a probe miss proves nothing
        older, since GC may have deleted ``known_id + 1``), and by LIST less than
        :data:`~slate_ops.admin.cost.SENSOR_LIST_INTERVAL_S` ago (so a
        database whose manifests were deleted without a newer one, by hand, is found missing within
        that interval, as a LIST finds it)."""
        confirmed = self.confirmed.get(name)
        return (
            known_id is not None
            and confirmed is not None
            and confirmed.manifest == known_id
            and confirmed.where == where
            and 0 <= now - confirmed.at < SENSOR_PROBE_MAX_AGE_S
            and 0 <= now - confirmed.listed < SENSOR_LIST_INTERVAL_S
        )

    def confirm(self, name: str, manifest_id: int, now: float, where: str, *, listed: bool) -> None:
        """Record that a poll started at ``now`` found ``manifest_id`` the latest of ``name`` at
        ``where`` (``listed``: by a LIST; else by a probe miss, which keeps the last LIST's time)."""
        before = self.confirmed.get(name)
        last_list = now if listed else (0.0 if before is None else before.listed)
        self.confirmed[name] = Confirmed(manifest_id, now, last_list, where)

    def add_poll(self, name: str, counts: RequestCounts, now: float) -> None:
        """Count one poll of ``name`` (its window starts now if it has none)."""
        self.polls[name] = self.polls.get(name, PollWindow(now)).add(counts)

    def close_windows(self, now: float, window_s: float = POLL_WINDOW_S) -> list[tuple[str, PollWindow]]:
        """The windows at least ``window_s`` old with polls in them, each replaced by an empty one
        starting ``now``."""
        closed = [
            (name, window)
            for name, window in sorted(self.polls.items())
            if window.polls and now - window.since >= window_s
        ]
        for name, _ in closed:
            self.polls[name] = PollWindow(now)
        return closed
