"""What each maintenance operation of a handle cost in object-store requests (issue 23).

:func:`metered` wraps one handle method: the method runs on a copy of the handle whose store is a
fresh :class:`~slate_ops.objstore.metering.MeteredStore` over the handle's (so concurrent operations
on one handle each count only their own requests), and its report comes back with ``requests`` set
(:func:`with_requests`). Dry runs are metered alike: their reads are what they cost.

On a SlateDB database only the requests made through slate_ops' store are counted: those SlateDB's
binding makes with its own object-store client (its manifest reads and writes, ``run_gc_once``'s
deletions, its compactor) cannot be seen, so :data:`BINDING_UNCOUNTED` holds for its reports.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, Self, TypeVar, cast

from slate_ops.config import CheckpointCreateResult
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.metering import ZERO, MeteredStore, RequestCounts

__all__ = ["BINDING_UNCOUNTED", "CheckpointCreated", "Meterable", "metered", "with_requests"]

BINDING_UNCOUNTED = (
    "SlateDB's binding makes some requests with its own object-store client; those are not counted"
)
"""Why a SlateDB database's ``requests`` are a lower bound."""


class CheckpointCreated(CheckpointCreateResult):
    """:class:`CheckpointCreateResult` with what creating the checkpoint cost (the handle's report)."""

    requests: RequestCounts = ZERO


class Meterable(Protocol):
    """A handle whose operations can be metered: a copy of it works on another store."""

    store: ObjectStore
    last_requests: RequestCounts

    def on_store(self, store: ObjectStore) -> Self:
        """This handle, working on ``store`` (the same database, through a wrapper of its store)."""
        ...


H = TypeVar("H", bound=Meterable)
P = ParamSpec("P")
R = TypeVar("R")


def with_requests(result: R, counts: RequestCounts) -> R:
    """``result`` carrying ``counts`` in its ``requests`` field; a result without one (a list, a
    :class:`DbStatus`, a :class:`Tag`) as it is (read the handle's ``last_requests`` then)."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        if any(f.name == "requests" for f in dataclasses.fields(result)):
            return cast(R, dataclasses.replace(cast(Any, result), requests=counts))
    elif isinstance(result, CheckpointCreateResult):
        return cast(R, CheckpointCreated(id=result.id, manifest_id=result.manifest_id, requests=counts))
    return result


def metered(method: Callable[Concatenate[H, P], R]) -> Callable[Concatenate[H, P], R]:
    """``method`` with its requests counted into its report and into the handle's ``last_requests``
    (module docstring)."""

    @functools.wraps(method)
    def run(self: H, /, *args: P.args, **kwargs: P.kwargs) -> R:
        meter = MeteredStore(self.store)
        try:
            result = method(self.on_store(meter), *args, **kwargs)
        finally:
            self.last_requests = counts = meter.counts
        return with_requests(result, counts)

    return run
