"""Transaction helpers: a sequenced counter (its codec, increment) ."""

from __future__ import annotations

import json

from slate_ops.txn import SequencedStore


class IntCodec:
    """A counter value, so tests can check that no increment is lost."""

    def encode(self, value: int) -> bytes:
        return json.dumps(value).encode()

    def decode(self, data: bytes, path: str) -> int:
        return int(json.loads(data))


def counter_store(store: object, **options: object) -> SequencedStore[int]:
    return SequencedStore(store, "db", "manifest", "manifest", IntCodec(), **options)  # type: ignore[arg-type]


def increment(current: object) -> int:
    return 1 if current is None else current.value + 1  # type: ignore[attr-defined]
