"""Concurrent conditional puts: exactly one creator wins, and a CAS counter loses no update.

Local stores race real processes (from a fresh forkserver, not forked from this threaded test
process), each with its own file descriptors and locks;
S3 races threads against moto, each thread with the shared thread-safe client.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from slate_ops.errors import PreconditionFailedError
from slate_ops.objstore import LocalStore, ObjectStore, PutMode, S3Store

PROCESSES = 8
INCREMENTS = 10  # per process (local) or thread (S3)


def try_create(store: ObjectStore, key: str, me: int, barrier: Any) -> bool:
    barrier.wait()
    try:
        store.put(key, f"racer-{me}".encode(), PutMode.create())
    except PreconditionFailedError:
        return False
    return True


def increment(store: ObjectStore, key: str, times: int, barrier: Any) -> int:
    """Add ``times`` to the counter with read / put-if-match / retry; return the number of retries."""
    barrier.wait()
    retries = 0
    for _ in range(times):
        while True:
            got = store.get(key)
            try:
                store.put(key, str(int(got.data) + 1).encode(), PutMode.if_match(got.meta.etag))
                break
            except PreconditionFailedError:
                retries += 1
    return retries


def _create_in_process(root: str, key: str, me: int, barrier: Any, results: Any) -> None:
    results.put((me, try_create(LocalStore(root), key, me, barrier)))


def _increment_in_process(root: str, key: str, times: int, barrier: Any, results: Any) -> None:
    results.put(increment(LocalStore(root), key, times, barrier))


def run_processes(target: Callable[..., None], args_for: Callable[[int], tuple[Any, ...]]) -> list[Any]:
    """Run ``target(*args_for(i), barrier, results)`` in PROCESSES processes; return what they queued."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])  # children fork with this module already imported
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_for(i), barrier, results)) for i in range(PROCESSES)]
    for proc in procs:
        proc.start()
    out = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return out


def test_local_create_race_has_one_winner(tmp_path: Path) -> None:
    LocalStore(tmp_path)  # create the root (and lock dir) once, before the race
    outcomes = run_processes(_create_in_process, lambda i: (str(tmp_path), "race/key", i))
    winners = [me for me, won in outcomes if won]
    assert len(winners) == 1
    assert LocalStore(tmp_path).get("race/key").data == f"racer-{winners[0]}".encode()


def test_local_cas_counter_loses_no_update(tmp_path: Path) -> None:
    LocalStore(tmp_path).put("counter", b"0")
    retries = run_processes(_increment_in_process, lambda i: (str(tmp_path), "counter", INCREMENTS))
    assert LocalStore(tmp_path).get("counter").data == str(PROCESSES * INCREMENTS).encode()
    assert sum(retries) > 0  # the racers really collided (typically ~100-300 lost CAS rounds)


def run_threads(fn: Callable[[int, threading.Barrier], Any]) -> list[Any]:
    barrier = threading.Barrier(PROCESSES)
    with ThreadPoolExecutor(PROCESSES) as pool:
        return list(pool.map(lambda i: fn(i, barrier), range(PROCESSES)))


@pytest.mark.s3
def test_s3_create_race_has_one_winner(make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store()
    for round_ in range(3):
        key = f"race/{round_}"
        won = run_threads(partial(try_create, store, key))
        winners = [i for i, w in enumerate(won) if w]
        assert len(winners) == 1
        assert store.get(key).data == f"racer-{winners[0]}".encode()


@pytest.mark.s3
def test_s3_cas_counter_loses_no_update(make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store()
    store.put("counter", b"0")
    increments = INCREMENTS // 2  # moto is slow under contention
    retries = run_threads(lambda i, barrier: increment(store, "counter", increments, barrier))
    assert store.get("counter").data == str(PROCESSES * increments).encode()
    assert sum(retries) > 0
