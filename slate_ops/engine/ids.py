"""Ids for the writer, from the injected clock when it is a full runtime (``new_uuid``/``new_ulid``,
see :mod:`slate_ops.runtime`), else from the system generators."""

from __future__ import annotations

import uuid

from ulid import ULID

from slate_ops.clock import Clock


def new_uuid(clock: Clock) -> uuid.UUID:
    make = getattr(clock, "new_uuid", None)
    return make() if make is not None else uuid.uuid4()


def new_ulid(clock: Clock) -> ULID:
    make = getattr(clock, "new_ulid", None)
    return make() if make is not None else ULID()
