"""S3 for tests: a moto server on loopback (one per session, requests serialised so conditional
puts are atomic as on S3), clients and buckets on it, and an AWS environment that never reaches
the developer's real credentials."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.server import ThreadedMotoServer
from werkzeug.serving import make_server

from slate_ops.objstore import S3Store
from slate_ops.objstore.s3 import make_s3_client

App = TypeVar("App")
Server = TypeVar("Server", bound=ThreadedMotoServer)

CREDENTIALS: dict[str, Any] = {
    "access_key_id": "testing",
    "secret_access_key": "testing",
    "region": "us-east-1",
}


class _SerializedApp:
    """Runs one request at a time through moto.

    moto checks ``If-None-Match``/``If-Match`` and then stores the object without a lock, so two
    concurrent conditional puts can both win; real S3 decides them atomically. Serialising
    requests restores that atomicity while connections stay concurrent.
    """

    def __init__(self, app: Any) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._lock:
            return drain(self._app(environ, start_response))


def drain(body: Iterable[bytes]) -> list[bytes]:
    """A WSGI response body read whole (and closed), so the app's work ends inside the caller."""
    try:
        return [b"".join(body)]
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()


class WrappedMotoServer(ThreadedMotoServer, Generic[App]):
    """moto's threaded S3 server on 127.0.0.1 (a port the OS chooses) whose WSGI app is moto's
    wrapped by ``wrap``, kept as :attr:`app` (a wrapper that serialises, counts, delays...)."""

    app: App

    def __init__(self, wrap: Callable[[Any], App]) -> None:
        super().__init__(ip_address="127.0.0.1", port=0, verbose=False)
        self._wrap = wrap

    def _server_entry(self) -> None:
        self.app = self._wrap(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(
            self._ip_address, self._port, self.app, True, request_handler=MotoRequestHandler
        )
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def endpoint(self) -> str:
        host, port = self.get_host_and_port()
        return f"http://{host}:{port}"


class AtomicMotoServer(WrappedMotoServer[_SerializedApp]):
    """The server whose conditional puts are atomic, as on S3 (:class:`_SerializedApp`)."""

    def __init__(self) -> None:
        super().__init__(_SerializedApp)


@contextlib.contextmanager
def serving(server: Server) -> Iterator[Server]:
    """``server`` started in an AWS environment of dummy credentials (:func:`isolate_aws_environment`),
    stopped afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        isolate_aws_environment(mp)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def remove_credentials(mp: pytest.MonkeyPatch, *, metadata: bool = False) -> None:
    """None of the developer's AWS settings (credentials, profiles, endpoints, config) nor
    ``SLATE_OPS_S3_*`` credentials (which the stores read before boto3's chain); without
    ``metadata``, no instance-metadata probing either: boto3's chain finds nothing."""
    for var in [v for v in os.environ if v.startswith(("AWS_", "SLATE_OPS_S3_")) and v != "AWS_CA_BUNDLE"]:
        mp.delenv(var)
    mp.setenv("AWS_CONFIG_FILE", os.devnull)
    mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    if not metadata:
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")


def isolate_aws_environment(mp: pytest.MonkeyPatch) -> None:
    """Dummy credentials, and none of the developer's AWS settings (profiles, endpoints, config) nor
    ``SLATE_OPS_S3_*`` credentials (which the stores read before boto3's chain)."""
    remove_credentials(mp, metadata=True)
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Isolate one test from the developer's AWS environment."""
    isolate_aws_environment(monkeypatch)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server on 127.0.0.1 (port chosen by the OS), for the whole session.

    Dummy AWS credentials are also put in the environment (and removed afterwards) so that any
    boto3 client made without explicit credentials never finds real ones.
    """
    with serving(AtomicMotoServer()) as server:
        yield server.endpoint


@pytest.fixture(scope="session")
def s3_client(moto_endpoint: str) -> Any:
    """One shared client (boto3 clients are thread-safe; making one costs ~0.2 s).

    Tests that register botocore event hooks must make their own (``make_s3_store(fresh=True)``).
    """
    return make_s3_client(endpoint_url=moto_endpoint, **CREDENTIALS)


@pytest.fixture
def make_bucket(s3_client: Any) -> Callable[[], str]:
    """Create a fresh uniquely named bucket, so S3 tests never see each other's objects."""

    def make() -> str:
        name = f"t-{uuid.uuid4().hex[:20]}"
        s3_client.create_bucket(Bucket=name)
        return name

    return make


@pytest.fixture
def make_s3_store(
    moto_endpoint: str, s3_client: Any, make_bucket: Callable[[], str]
) -> Callable[..., S3Store]:
    """Make an S3Store on a fresh bucket.

    ``fresh=True`` gives it its own client, with ``max_attempts`` as botocore's retry budget.
    """

    def make(prefix: str = "pfx", *, fresh: bool = False, max_attempts: int = 5) -> S3Store:
        client = s3_client
        if fresh:
            client = make_s3_client(endpoint_url=moto_endpoint, max_attempts=max_attempts, **CREDENTIALS)
        return S3Store(make_bucket(), prefix, client=client)

    return make
