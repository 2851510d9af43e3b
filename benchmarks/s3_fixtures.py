"""What the S3 benchmarks share: moto's S3 server on loopback, buckets, and SlateDB's S3 store.

``start_moto()`` starts ``moto.server.ThreadedMotoServer`` on a free loopback port; ``new_bucket``
creates a fresh bucket on it; ``slatedb_store`` builds the ``slatedb`` binding's
``ObjectStoreBuilder(S3)`` store for an endpoint (moto itself, or a
:class:`benchmarks.latency_proxy.LatencyProxy` in front of it). Used by bench_s3 (which re-exports
these names) and the other S3 benchmarks.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

from slate_ops.objstore import S3Store
from slate_ops.objstore.s3 import make_s3_client

__all__ = [
    "KEYS",
    "REGION",
    "MotoProcess",
    "load_slatedb",
    "new_bucket",
    "ours_store",
    "slatedb_store",
    "start_moto",
    "start_moto_process",
]

KEYS: dict[str, Any] = {"access_key_id": "testing", "secret_access_key": "testing"}
REGION = "us-east-1"


def start_moto() -> tuple[Any, str]:
    """A started ``ThreadedMotoServer`` on loopback and its endpoint URL; ``server.stop()`` ends it."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


class MotoProcess:
    """moto's S3 server in a child process (``python -m moto.server``), like a remote S3: its
    per-request work does not compete with the engine's threads for this process's GIL."""

    def __init__(self, timeout: float = 30.0) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto.server did not start on port {port}") from None
                time.sleep(0.1)

    def __enter__(self) -> MotoProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_moto_process() -> tuple[MotoProcess, str]:
    """moto's S3 server started in a child process, and its endpoint URL; ``server.stop()`` ends it."""
    server = MotoProcess()
    return server, server.endpoint


def new_bucket(endpoint: str) -> str:
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    make_s3_client(endpoint_url=endpoint, region=REGION, **KEYS).create_bucket(Bucket=bucket)
    return bucket


def ours_store(endpoint: str, bucket: str, root: str) -> S3Store:
    """slate_ops' S3 store under ``root`` of ``bucket`` (its boto3 client is shared per endpoint)."""
    return S3Store(bucket, root, endpoint_url=endpoint, region=REGION, **KEYS)


def load_slatedb() -> Any | None:
    """The ``slatedb.uniffi`` module, or None when the optional ``slatedb`` package is missing."""
    try:
        return importlib.import_module("slatedb.uniffi")
    except ImportError:
        return None


def slatedb_store(sdb: Any, endpoint: str, bucket: str) -> Any:
    """The binding's S3 object store for ``bucket`` at ``endpoint`` (path-style, plain HTTP)."""
    builder = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.S3)
    for key, value in (
        ("aws_endpoint", endpoint),
        ("aws_allow_http", "true"),
        ("aws_region", REGION),
        ("aws_bucket_name", bucket),
        ("aws_access_key_id", "testing"),
        ("aws_secret_access_key", "testing"),
        ("aws_virtual_hosted_style_request", "false"),
    ):
        builder.with_config(key, value)
    return builder.build()


async def compact_l0_with_binding(sdb: Any, path: str, store: Any, *, polls: int) -> Any:
    """Submit a compaction of every L0 SST of SlateDB's database at ``path`` through the binding's
    Admin (a compactor must run: the database's own, while it is open) and follow it for up to
    ``polls`` times 50 ms; the compaction as last read (None, or any status: the caller checks it)."""
    import asyncio

    admin = sdb.AdminBuilder(path, store).build()
    manifest = await admin.read_manifest(None)
    spec = sdb.CompactionSpec.TIERED(
        segment=b"", sources=[sdb.SourceId.SST_VIEW(v.id) for v in manifest.l0], destination=0
    )
    compaction = await admin.submit_compaction(spec)
    ended = (sdb.CompactionStatus.COMPLETED, sdb.CompactionStatus.FAILED)
    for _ in range(polls):
        compaction = await admin.read_compaction(compaction.id, None)
        if compaction is not None and compaction.status in ended:
            break
        await asyncio.sleep(0.05)
    return compaction
