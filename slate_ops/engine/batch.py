"""WriteBatch: puts and deletes applied atomically with one sequence number."""

from __future__ import annotations

from slate_ops.errors import InvalidArgumentError

KIND_VALUE = 0
KIND_TOMBSTONE = 1


def check_key(key: object) -> bytes:
    if type(key) is not bytes:
        if not isinstance(key, bytes | bytearray | memoryview):
            raise InvalidArgumentError(f"keys must be bytes, got {type(key).__name__}")
        key = bytes(key)
    if not key:
        raise InvalidArgumentError("keys must not be empty")
    return key


def check_value(value: object) -> bytes:
    if type(value) is not bytes:
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise InvalidArgumentError(f"values must be bytes, got {type(value).__name__}")
    return value


class WriteBatch:
    """A list of puts and deletes; :meth:`Db.write` applies them all or none.

    Within a batch, a later operation on the same key wins.
    """

    def __init__(self) -> None:
        self.ops: list[tuple[bytes, int, bytes]] = []

    def put(self, key: bytes, value: bytes) -> WriteBatch:
        self.ops.append((check_key(key), KIND_VALUE, check_value(value)))
        return self

    def delete(self, key: bytes) -> WriteBatch:
        self.ops.append((check_key(key), KIND_TOMBSTONE, b""))
        return self

    def __len__(self) -> int:
        return len(self.ops)
