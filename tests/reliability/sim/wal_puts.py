"""WAL PUTs in flight, reordered by the seed: the simulation's writer keeps several WAL PUTs in flight
(``DbOptions.wal_puts_in_flight``), and its runtime's pool for them lands them in a seeded order, so WAL
``N + 1`` can land before ``N`` (docs/design/engine.md, "Several WAL PUTs in flight") — and a crash,
a fault or another actor's step can fall between the two, deterministically.

:class:`ReorderingExecutor` holds every submitted call until one of its futures is waited for, then
runs all the held calls in the caller's thread, in an order drawn from the run's seeded random source:
one reproducible order of store calls per seed, as the :class:`~slate_ops.runtime.InlineExecutor` of
a :class:`~slate_ops.runtime.ManualRuntime` gives, but not the order of submission. Only the writer's
explicit paths run under the simulation (no flusher thread), and each of them waits for its PUTs.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

from slate_ops.objstore.wrappers import SimulatedCrash
from slate_ops.runtime import ManualRuntime

_R = TypeVar("_R")
REORDER_WAL_PUTS = os.environ.get("SLATE_OPS_SIM_REORDER_WAL_PUTS", "1") == "1"
"""On by default: the WAL PUTs a writer starts together land in an order drawn from the seed, so WAL
``N + 1`` can land before ``N`` with a crash, a fault or another actor in between (rules 1-3 of "Several
WAL PUTs in flight"). ``SLATE_OPS_SIM_REORDER_WAL_PUTS=0`` lands them in id order."""
WAL_PUT_POOL = "slate-ops-wal-put"
"""The name the writer gives its pool of WAL PUTs (slate_ops.engine.db)."""


class _Held(Future[_R]):
    """A future whose call runs (with every other held one) when it is first waited for."""

    def __init__(self, executor: ReorderingExecutor) -> None:
        super().__init__()
        self.executor = executor

    def result(self, timeout: float | None = None) -> _R:
        if not self.done():
            self.executor.run_held()
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.done():
            self.executor.run_held()
        return super().exception(timeout)


class ReorderingExecutor(Executor):
    """Runs submitted calls when one of them is waited for, all of them, in a seeded order."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._held: list[tuple[Future[Any], Callable[[], Any]]] = []
        self.reordered = 0  # batches run in another order than submitted (for the tests)

    def submit(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> Future[_R]:
        future: _Held[_R] = _Held(self)
        self._held.append((future, lambda: fn(*args, **kwargs)))
        return future

    def run_held(self) -> None:
        held, self._held = self._held, []
        order = list(range(len(held)))
        self._rng.shuffle(order)
        self.reordered += order != sorted(order)
        for index in order:
            future, call = held[index]
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = call()
            except SimulatedCrash as error:  # the process died here: the other calls never run
                future.set_exception(error)
                for later, _ in held:
                    if not later.done() and later.set_running_or_notify_cancel():
                        later.set_exception(error)  # never ran: the process died first
                return
            except BaseException as error:
                future.set_exception(error)
            else:
                future.set_result(result)


class SimRuntime(ManualRuntime):
    """The simulation's :class:`ManualRuntime`, whose pool for a writer's WAL PUTs reorders them."""

    def __init__(
        self, start: float, *, seed: int, wal_put_seed: int, reorder: bool = REORDER_WAL_PUTS
    ) -> None:
        super().__init__(start, seed=seed)
        self._wal_put_order = random.Random(wal_put_seed)
        self._reorder = reorder
        self.wal_put_pools: list[ReorderingExecutor] = []

    def executor(self, max_workers: int, name: str) -> Executor:
        if not self._reorder or not name.startswith(WAL_PUT_POOL):
            return super().executor(max_workers, name)
        pool = ReorderingExecutor(self._wal_put_order)
        self.wal_put_pools.append(pool)
        return pool
