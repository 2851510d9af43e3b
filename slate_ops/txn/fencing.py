"""Epoch fencing on top of a sequenced store (docs/design/coordination.md, "Fencing").

A writer or compactor bumps its epoch exactly once when it opens; every later update first checks
that the stored epoch still equals its own. A higher stored epoch means a newer instance took over:
the update is refused with :class:`FencedError`, raised to the caller — never logged and dropped,
which is the data-loss flaw SlateDB's manifest design (docs/design/coordination.md)'s NOTE describes.

A namespace deleted under the holder (the database was destroyed: the version it read is gone and
nothing newer exists) fences it too: :class:`DbDeletedError`, a :class:`FencedError`
(docs/design/coordination.md, "Fencing under races").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from slate_ops.errors import CorruptObjectError, DbDeletedError, FencedError, NamespaceDeletedError
from slate_ops.txn.sequenced import SequencedStore, Versioned

T = TypeVar("T")


class EpochField(Generic[T]):
    """How to read and set one epoch (``writer_epoch``, ``compactor_epoch``) on a value."""

    def __init__(self, role: str, get: Callable[[T], int], set: Callable[[T, int], T]) -> None:
        self.role = role
        self.get = get
        self.set = set


class FenceableStore(Generic[T]):
    """A :class:`SequencedStore` view that holds one epoch and refuses updates once fenced."""

    def __init__(self, sequence: SequencedStore[T], field: EpochField[T], epoch: int) -> None:
        self.sequence = sequence
        self.field = field
        self.epoch = epoch

    @classmethod
    def claim(
        cls,
        sequence: SequencedStore[T],
        field: EpochField[T],
        change: Callable[[Versioned[T], int], T] = lambda current, epoch: current.value,
    ) -> tuple[FenceableStore[T], Versioned[T]]:
        """Bump the epoch once, together with ``change(current, new_epoch)``; fences older holders.

        ``change`` sees the latest version with the new epoch already set. On a lost race the bump
        is recomputed from the re-read version, so exactly one committed version has the new epoch.
        """
        claimed: list[int] = []

        def bump(current: Versioned[T] | None) -> T:
            if current is None:
                raise CorruptObjectError(sequence.directory, "nothing to fence: the namespace is empty")
            epoch = field.get(current.value) + 1
            claimed[:] = [epoch]
            return change(Versioned(current.id, field.set(current.value, epoch)), epoch)

        committed = sequence.update(bump)
        assert committed is not None  # bump never returns None
        return cls(sequence, field, claimed[0]), committed

    def check(self, value: T) -> None:
        stored = self.field.get(value)
        if stored > self.epoch:
            raise FencedError(self.sequence.directory, self.field.role, self.epoch, stored)
        if stored < self.epoch:
            # Epochs never go down in one namespace: it was deleted and created again under us.
            raise DbDeletedError(
                self.sequence.directory,
                self.field.role,
                self.epoch,
                f"the stored {self.field.role} epoch {stored} is lower than its own, so the namespace was "
                "deleted and created again",
            )

    def update(self, change: Callable[[Versioned[T]], T | None]) -> Versioned[T]:
        """Apply ``change`` to the latest version after the epoch check; see SequencedStore.update.

        Returning None commits nothing (the latest version is returned).
        """

        def fenced_change(current: Versioned[T] | None) -> T | None:
            if current is None:
                raise self._deleted()
            self.check(current.value)
            return change(current)

        with self._deletion_fences():
            committed = self.sequence.update(fenced_change)
        assert committed is not None
        return committed

    def refresh(self) -> Versioned[T]:
        """Re-read the latest version and raise :class:`FencedError` if a newer epoch holds it."""
        with self._deletion_fences():
            latest = self.sequence.read_latest()
        return self._checked(latest)

    def confirm(self) -> Versioned[T]:
        """Confirm, with requests that all start now, that the chain is intact at our epoch.

        :meth:`SequencedStore.confirm_latest`: the version last read or committed still exists
        unchanged and nothing follows it (one round trip), or the newer versions hold our epoch.
        Raises :class:`FencedError` for a higher epoch and :class:`DbDeletedError` if the database
        was deleted. A writer acknowledges a durable write only after a confirmation that started
        after its WAL SST was written.
        """
        with self._deletion_fences():
            latest = self.sequence.confirm_latest()
        return self._checked(latest)

    def _checked(self, latest: Versioned[T] | None) -> Versioned[T]:
        if latest is None:
            raise self._deleted()
        self.check(latest.value)
        return latest

    def _deleted(self) -> DbDeletedError:
        return DbDeletedError(self.sequence.directory, self.field.role, self.epoch)

    @contextlib.contextmanager
    def _deletion_fences(self) -> Iterator[None]:
        try:
            yield
        except NamespaceDeletedError as error:
            raise self._deleted() from error
