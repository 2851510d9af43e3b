"""A Spark standalone cluster on this machine, started from PySpark's own scripts: for tests,
benchmarks and trying the cluster path without installing Spark.

:func:`start_standalone_cluster` runs ``$SPARK_HOME/bin/spark-class
org.apache.spark.deploy.master.Master`` and one ``...deploy.worker.Worker`` per worker, each in its
own process group (the executors a worker launches, and their Python workers, join that group),
with ``SPARK_HOME`` = pyspark's package directory. Each daemon gets an environment *without* the
``AWS_*`` and ``SLATE_OPS_S3_*`` variables by default, so whatever S3 access the tasks have comes
from the application (:mod:`slate_ops.spark.credentials`), not from the workers. ``stop()`` kills
every process group (TERM, then KILL).

``python -m slate_ops.spark.cluster`` starts two workers and prints the master URL until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import SparkSession

from slate_ops.errors import SlateOpsError
from slate_ops.runtime import SYSTEM_RUNTIME

SCRUBBED_PREFIXES = ("AWS_", "SLATE_OPS_S3_")
"""Environment variables left out of the cluster daemons' environment by default."""


class ClusterError(SlateOpsError):
    """The standalone cluster did not start, or its executors did not register, in time."""


def spark_home() -> Path:
    """PySpark's package directory, which holds ``bin/spark-class`` and the jars."""
    return Path(os.path.dirname(pyspark.__file__))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Daemon:
    """One Spark daemon process of a :class:`StandaloneCluster` (master or worker) and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class StandaloneCluster:
    """A running master and its workers; :meth:`stop` ends every process (also a context manager)."""

    master_url: str
    """``spark://127.0.0.1:<port>``: the ``spark.master`` of a session on this cluster."""
    master_ui: str
    """``http://127.0.0.1:<port>``: the master's web UI; ``/json/`` is its state."""
    worker_uis: tuple[str, ...]
    work_dir: Path
    """Per worker ``worker-<i>/``: its applications' executor logs; ``logs/``: the daemons' output."""
    daemons: list[Daemon] = field(default_factory=list, repr=False)
    """The running master and workers (the master first); :meth:`stop` ends and clears them."""

    def state(self) -> dict[str, Any]:
        """The master's JSON state: workers, alive workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def stop(self) -> None:
        """TERM every process group, KILL what is left after 10 s; safe to call twice."""
        for daemon in reversed(self.daemons):
            _signal_group(daemon.process, signal.SIGTERM)
        deadline = SYSTEM_RUNTIME.monotonic() + 10
        for daemon in self.daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.process.wait(max(0.1, deadline - SYSTEM_RUNTIME.monotonic()))
            _signal_group(daemon.process, signal.SIGKILL)  # the group's executors and Python workers too
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.process.wait(5)
        self.daemons.clear()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)  # start_new_session: the group id is the leader's pid


def daemon_environment(
    python: str, scrub: Sequence[str] = SCRUBBED_PREFIXES, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """This process's environment without variables starting with ``scrub``, plus what Spark needs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(tuple(scrub))}
    env.update(
        SPARK_HOME=str(spark_home()),
        PYSPARK_PYTHON=python,
        SPARK_LOCAL_IP="127.0.0.1",
        # the master's REST submission server (port 6066) is not needed and could collide
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
    )
    env.update(extra or {})
    return env


def start_standalone_cluster(
    workers: int = 2,
    *,
    cores: int = 1,
    memory: str = "1g",
    work_dir: Path | None = None,
    python: str = sys.executable,
    scrub: Sequence[str] = SCRUBBED_PREFIXES,
    timeout: float = 120.0,
) -> StandaloneCluster:
    """Start a master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1 and wait
    until every worker has registered; :class:`ClusterError` (with the daemons' log tails) if one
    exits or ``timeout`` passes first. Executors run ``python`` for PySpark's workers."""
    work_dir = Path(tempfile.mkdtemp(prefix="slate-spark-")) if work_dir is None else work_dir
    logs = work_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = daemon_environment(python, scrub)
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui_port = free_port(), free_port()
    cluster = StandaloneCluster(
        master_url=f"spark://127.0.0.1:{port}",
        master_ui=f"http://127.0.0.1:{ui_port}",
        worker_uis=(),
        work_dir=work_dir,
    )

    def launch(name: str, args: list[str]) -> None:
        log = logs / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [spark_class, *args],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        cluster.daemons.append(Daemon(name, process, log))

    try:
        launch(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
            ],
        )
        uis = []
        for index in range(workers):
            worker_ui = free_port()
            directory = work_dir / f"worker-{index}"
            directory.mkdir(exist_ok=True)
            launch(
                f"worker-{index}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    cluster.master_url,
                    *("--host", "127.0.0.1", "--cores", str(cores), "--memory", memory),
                    *("--webui-port", str(worker_ui), "--work-dir", str(directory)),
                ],
            )
            uis.append(f"http://127.0.0.1:{worker_ui}")
        cluster.worker_uis = tuple(uis)
        _await(cluster, lambda: _alive_workers(cluster) >= workers, timeout, f"{workers} workers to register")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _alive_workers(cluster: StandaloneCluster) -> int:
    try:
        return int(cluster.state().get("aliveworkers", 0))
    except (OSError, ValueError, urllib.error.URLError):
        return 0  # the master's UI is not up yet


def _await(cluster: StandaloneCluster, ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = SYSTEM_RUNTIME.monotonic() + timeout
    while not ready():
        dead = [d for d in cluster.daemons if d.process.poll() is not None]
        if dead or SYSTEM_RUNTIME.monotonic() > deadline:
            reason = f"{dead[0].name} exited" if dead else f"no {what} after {timeout:.0f} s"
            tails = "\n".join(f"--- {d.name} ({d.log}):\n{d.tail()}" for d in cluster.daemons)
            raise ClusterError(f"the standalone cluster did not start: {reason}.\n{tails}")
        time.sleep(0.25)


def wait_for_executors(spark: SparkSession, count: int, timeout: float = 120.0) -> None:
    """Wait until ``count`` executors (besides the driver) have registered with ``spark``'s driver,
    so that a job's tasks can spread over all of them; :class:`ClusterError` after ``timeout``."""
    tracker = spark.sparkContext._jsc.sc()
    deadline = SYSTEM_RUNTIME.monotonic() + timeout
    while int(tracker.getExecutorMemoryStatus().size()) - 1 < count:
        if SYSTEM_RUNTIME.monotonic() > deadline:
            raise ClusterError(
                f"only {int(tracker.getExecutorMemoryStatus().size()) - 1} of {count} executors "
                f"registered with the driver after {timeout:.0f} s"
            )
        time.sleep(0.2)


@contextlib.contextmanager
def standalone_cluster(workers: int = 2, **options: Any) -> Iterator[StandaloneCluster]:
    """:func:`start_standalone_cluster` as a context manager."""
    cluster = start_standalone_cluster(workers, **options)
    try:
        yield cluster
    finally:
        cluster.stop()


def main() -> None:  # pragma: no cover - interactive
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the daemons on TERM too
    with standalone_cluster(2) as cluster:
        print(f"master {cluster.master_url}  (UI {cluster.master_ui}); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":  # pragma: no cover
    main()


__all__ = [
    "SCRUBBED_PREFIXES",
    "ClusterError",
    "Daemon",
    "StandaloneCluster",
    "daemon_environment",
    "free_port",
    "spark_home",
    "standalone_cluster",
    "start_standalone_cluster",
    "wait_for_executors",
]
