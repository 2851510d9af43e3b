"""A tiny threaded HTTP proxy that adds a fixed delay to every request (S3-like latency for moto).

``with LatencyProxy("http://127.0.0.1:PORT", delay=0.05) as proxy:`` listens on a free loopback
port (``proxy.endpoint``), sleeps ``delay`` seconds before forwarding each request unchanged to the
upstream (headers included: requests are signed with the Host the client sent), and counts the
requests it forwards by method and by path (``proxy.counts``, ``proxy.reset()``), so a benchmark
counts the requests of any client, SlateDB's Rust one included. Each handler thread keeps one
keep-alive connection to the upstream, so the proxy adds the delay and little else.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

__all__ = ["HOP_BY_HOP", "LatencyProxy", "read_request_body"]

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: LatencyProxy
    stopped = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End the kept-alive client connections (a client's pool, e.g. SlateDB's binding, keeps
        them after its last request): each handler thread then sees the end of its stream and exits."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: object, client_address: object) -> None:
        # After stop(), a request in flight on a connection being closed fails: not worth a traceback.
        if not self.stopped:
            super().handle_error(request, client_address)  # type: ignore[arg-type]


def read_request_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body as the client sent it: by ``Content-Length``, or chunked (boto3 streams
    uploads that way). Shared with the chaos proxy of the reliability tests."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";", 1)[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY towards the client: an answer's headers and body go out as two writes, and with
    # Nagle the body waits for the client's delayed ACK (~40 ms on Linux) — added to every GET.
    disable_nagle_algorithm = True
    _conn: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    do_PUT = do_POST = do_HEAD = do_DELETE = do_GET

    def _proxy(self) -> None:
        proxy = self.server.proxy
        body = read_request_body(self)
        proxy.tally(self.command, self.path)
        if proxy.delay:
            time.sleep(proxy.delay)
        status, reason, headers, data = self._forward(body)
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        if self.command == "HEAD":  # a HEAD answer's length is the object's, with no body
            size = next((v for n, v in headers if n.lower() == "content-length"), "0")
            self.send_header("Content-Length", size)
            self.end_headers()
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        if self.headers.get("Connection", "").lower() == "close":
            self.close_connection = True

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        for attempt in (1, 2):  # a kept-alive upstream connection may have been closed meanwhile
            conn = self._upstream(fresh=attempt == 2)
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in HOP_BY_HOP:
                        conn.putheader(name, value)
                if body or self.command in ("PUT", "POST"):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                response = conn.getresponse()
                data = response.read()
                if response.will_close:
                    self._drop_upstream()
                return response.status, response.reason, response.getheaders(), data
            except (OSError, http.client.HTTPException):
                self._drop_upstream()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _upstream(self, fresh: bool) -> http.client.HTTPConnection:
        conn = self._conn
        if conn is None or fresh:
            host, port = self.server.proxy.upstream
            conn = http.client.HTTPConnection(host, port, timeout=120)
            conn.connect()
            assert conn.sock is not None
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conn = conn
        return conn

    def _drop_upstream(self) -> None:
        conn = self._conn
        if conn is not None:
            conn.close()
            self._conn = None

    def finish(self) -> None:
        self._drop_upstream()
        super().finish()


def _is_list(path: str) -> bool:
    """Whether a path-style GET lists a bucket (``/bucket?list-type=2&prefix=…``): no key in it."""
    target, _, query = path.partition("?")
    return "list-type=" in query or target.strip("/").count("/") == 0


class LatencyProxy:
    """Forwards to ``upstream`` (``http://host:port``) after ``delay`` seconds per request."""

    def __init__(self, upstream: str, delay: float) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream = (parts.hostname, parts.port)
        self.delay = delay
        self._counts: Counter[str] = Counter()
        self._kinds: Counter[str] = Counter()
        self._wal_gets = 0
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="latency-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def counts(self) -> dict[str, int]:
        """Requests forwarded since the last :meth:`reset`, by method."""
        with self._lock:
            return dict(self._counts)

    @property
    def kinds(self) -> dict[str, int]:
        """Requests forwarded since the last :meth:`reset`, by S3 operation: as :attr:`counts`, but a
        GET of a bucket (``?list-type=``, no key) counts as ``LIST``, not ``GET``."""
        with self._lock:
            return dict(self._kinds)

    @property
    def wal_gets(self) -> int:
        """GETs of WAL objects (a path with ``/wal/``) since the last :meth:`reset`."""
        with self._lock:
            return self._wal_gets

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._kinds.clear()
            self._wal_gets = 0

    def tally(self, method: str, path: str) -> None:
        with self._lock:
            self._counts[method] += 1
            self._kinds["LIST" if method == "GET" and _is_list(path) else method] += 1
            if method == "GET" and "/wal/" in path:
                self._wal_gets += 1

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.stopped = True
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
