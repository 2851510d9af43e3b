"""A fault-injecting HTTP proxy in front of an S3 server (moto on loopback), for the chaos soak.

Each *label* (one per actor of the soak) gets its own listening port on 127.0.0.1, so faults and
retries are counted per actor; all ports forward to the same upstream. Per request, a seeded
random draw (one ``random.Random`` per label) picks at most one fault:

``slowdown_503``
    answer ``503 SlowDown`` with S3's XML error body; the request never reaches the server.
``throttle_429``
    answer ``429 TooManyRequests`` (what S3-compatible services send when throttling).
``reset_mid_request``
    read the headers and part of the body, then reset the connection (RST): never applied.
``reset_before_forward``
    read the whole request, then reset the connection: never applied.
``reset_after_apply``
    forward the request (the server applies it), then reset the connection instead of answering:
    the client cannot know that a put was applied — the put-outcome-unknown path.
``reset_mid_response``
    forward the request, send the response's headers and half its body, then reset: a GET's
    truncated body is read outside botocore's retries, so the error reaches the caller.
``latency``
    forward normally after a random delay (combines with no other fault).

Optionally, *storms*: windows of ``storm_length_s`` every ``storm_every_s`` seconds in which each
error fault's probability is multiplied, so botocore's retries run out and errors reach the actors.

Retries are recognised by botocore's ``amz-sdk-request: attempt=N; max=M`` header (N > 1), which
standard-mode retries send with every attempt.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from benchmarks.latency_proxy import HOP_BY_HOP as PROXY_HOP_BY_HOP
from benchmarks.latency_proxy import read_request_body

SLOWDOWN_503 = "slowdown_503"
THROTTLE_429 = "throttle_429"
RESET_MID_REQUEST = "reset_mid_request"
RESET_BEFORE_FORWARD = "reset_before_forward"
RESET_AFTER_APPLY = "reset_after_apply"
RESET_MID_RESPONSE = "reset_mid_response"
LATENCY = "latency"

ERROR_FAULTS = (
    SLOWDOWN_503,
    THROTTLE_429,
    RESET_MID_REQUEST,
    RESET_BEFORE_FORWARD,
    RESET_AFTER_APPLY,
    RESET_MID_RESPONSE,
)
FAULT_KINDS = (*ERROR_FAULTS, LATENCY)

# Headers that describe one hop, not the message: never forwarded as they are. The body is read
# whole before forwarding, so the client's Expect: 100-continue is answered here, not passed on.
HOP_BY_HOP = PROXY_HOP_BY_HOP | {"expect"}
_ERROR_BODIES = {
    SLOWDOWN_503: (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    THROTTLE_429: (429, "Too Many Requests", "TooManyRequests", "Too many requests, please slow down."),
}


@dataclass(frozen=True)
class FaultRates:
    """The probability of each fault per request, and the storm schedule (``storm_every_s=0``: none)."""

    slowdown_503: float = 0.02
    throttle_429: float = 0.01
    reset_mid_request: float = 0.01
    reset_before_forward: float = 0.01
    reset_after_apply: float = 0.02
    reset_mid_response: float = 0.005
    latency: float = 0.08
    latency_s: tuple[float, float] = (0.005, 0.15)
    storm_every_s: float = 0.0
    storm_length_s: float = 1.5
    storm_factor: float = 10.0

    def __post_init__(self) -> None:
        if sum(getattr(self, kind) for kind in FAULT_KINDS) > 1.0:
            raise ValueError(f"fault probabilities add up to more than 1: {self}")

    @classmethod
    def none(cls) -> FaultRates:
        return cls(
            slowdown_503=0.0,
            throttle_429=0.0,
            reset_mid_request=0.0,
            reset_before_forward=0.0,
            reset_after_apply=0.0,
            reset_mid_response=0.0,
            latency=0.0,
        )


@dataclass
class LabelStats:
    """What one label's port saw. ``requests`` counts every request, faulted or not."""

    requests: int = 0
    forwarded: int = 0
    retries: int = 0
    by_method: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    fault_methods: Counter[str] = field(default_factory=Counter)  # "reset_after_apply PUT": n
    storm_requests: int = 0
    # A conditional put that botocore resent and the server refused with 412: usually the resend
    # meeting the object its own first attempt created (settled by the put id, not guessed).
    retried_412: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "forwarded": self.forwarded,
            "retries": self.retries,
            "retried_412": self.retried_412,
            "by_method": dict(sorted(self.by_method.items())),
            "faults": {kind: self.faults.get(kind, 0) for kind in FAULT_KINDS},
            "fault_methods": dict(sorted(self.fault_methods.items())),
            "storm_requests": self.storm_requests,
        }


@dataclass(frozen=True)
class _Forced:
    kind: str
    matches: Callable[[str, str], bool]  # (method, path)


class FaultInjector:
    """Draws the fault of each request (seeded per label) and keeps the counts; thread-safe."""

    def __init__(self, rates: FaultRates, seed: int, labels: Iterable[str]) -> None:
        self.rates = rates
        self.seed = seed
        self._lock = threading.Lock()
        self._rngs = {label: random.Random(f"{seed}:{label}") for label in labels}
        self._stats = {label: LabelStats() for label in self._rngs}
        self._forced: list[_Forced] = []
        self._started = time.monotonic()
        self.enabled = True

    def force(self, kind: str, *, method: str | None = None, path_contains: str | None = None) -> None:
        """Inject ``kind`` into the next request that matches (tests), whatever the rates say."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")

        def matches(request_method: str, path: str) -> bool:
            return (method is None or request_method == method) and (
                path_contains is None or path_contains in path
            )

        with self._lock:
            self._forced.append(_Forced(kind, matches))

    def in_storm(self) -> bool:
        every = self.rates.storm_every_s
        if every <= 0:
            return False
        return (time.monotonic() - self._started) % every >= every - self.rates.storm_length_s

    def decide(self, label: str, method: str, path: str, attempt: int) -> tuple[str | None, float]:
        """The fault for this request (None: none) and the latency to add; counts the request."""
        storm = self.in_storm()
        with self._lock:
            stats = self._stats[label]
            stats.requests += 1
            stats.by_method[method] += 1
            stats.retries += attempt > 1
            stats.storm_requests += storm
            for i, forced in enumerate(self._forced):
                if forced.matches(method, path):
                    del self._forced[i]
                    kind: str | None = forced.kind
                    break
            else:
                kind = self._draw(self._rngs[label], storm) if self.enabled else None
            delay = 0.0
            if kind == LATENCY:
                delay = self._rngs[label].uniform(*self.rates.latency_s)
            if kind is not None:
                stats.faults[kind] += 1
                stats.fault_methods[f"{kind} {method}"] += 1
            return kind, delay

    def _draw(self, rng: random.Random, storm: bool) -> str | None:
        roll = rng.random()
        for kind in FAULT_KINDS:
            p: float = getattr(self.rates, kind)
            if storm and kind in ERROR_FAULTS:
                p *= self.rates.storm_factor
            if roll < p:
                return kind
            roll -= p
        return None

    def forwarded(self, label: str, method: str, status: int, attempt: int) -> None:
        with self._lock:
            stats = self._stats[label]
            stats.forwarded += 1
            stats.retried_412 += method == "PUT" and status == 412 and attempt > 1

    def stats(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {label: stats.as_dict() for label, stats in self._stats.items()}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, label: str, injector: FaultInjector, upstream: tuple[str, int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.label = label
        self.injector = injector
        self.upstream = upstream


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like S3: botocore reuses pooled connections
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    def do_HEAD(self) -> None:
        self._proxy()

    def do_PUT(self) -> None:
        self._proxy()

    def do_POST(self) -> None:
        self._proxy()

    def do_DELETE(self) -> None:
        self._proxy()

    def _proxy(self) -> None:
        injector, label = self.server.injector, self.server.label
        attempt = _attempt(self.headers.get("amz-sdk-request"))
        kind, delay = injector.decide(label, self.command, self.path, attempt)
        if kind == RESET_MID_REQUEST:
            length = int(self.headers.get("Content-Length") or 0)
            if length > 1:
                self.rfile.read(length // 2)
            self._reset()
            return
        body = read_request_body(self)
        if kind == RESET_BEFORE_FORWARD:
            self._reset()
            return
        if kind in _ERROR_BODIES:
            self._send_error(kind)
            return
        if delay:
            time.sleep(delay)
        status, reason, headers, data = self._forward(body)
        injector.forwarded(label, self.command, status, attempt)
        if kind == RESET_AFTER_APPLY or (kind == RESET_MID_RESPONSE and len(data) < 2):
            self._reset()  # nothing to cut in half: the whole answer is lost
            return
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        if self.command == "HEAD":  # a HEAD answer's length is the object's, with no body
            size = next((v for n, v in headers if n.lower() == "content-length"), str(len(data)))
            self.send_header("Content-Length", size)
            self.end_headers()
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if kind == RESET_MID_RESPONSE:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self._reset()
                return
            self.wfile.write(data)
        if self.headers.get("Connection", "").lower() == "close":
            self.close_connection = True

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=120)
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Host is kept as the client sent it: the request is signed with it.
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    conn.putheader(name, value)
            if body or self.command in ("PUT", "POST"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            response = conn.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            conn.close()

    def _send_error(self, kind: str) -> None:
        status, reason, code, message = _ERROR_BODIES[kind]
        request_id = uuid.uuid4().hex[:16].upper()
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<RequestId>{request_id}</RequestId><HostId>chaos-proxy</HostId></Error>"
        ).encode()
        self.send_response_only(status, reason)
        self.send_header("Content-Type", "application/xml")
        self.send_header("x-amz-request-id", request_id)
        if self.command == "HEAD":  # S3 sends no body with a HEAD error
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def _reset(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0), sending nothing."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()


def _attempt(header: str | None) -> int:
    """N from ``amz-sdk-request: attempt=N; max=M`` (1 without the header)."""
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "attempt" and value.isdigit():
            return int(value)
    return 1


class ChaosProxy:
    """One listening port per label, all forwarding to ``upstream`` through one injector.

    Use as a context manager, or :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        upstream: str,
        rates: FaultRates | None = None,
        *,
        seed: int = 0,
        labels: Iterable[str] = ("default",),
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        labels = tuple(labels)
        self.injector = FaultInjector(rates or FaultRates(), seed, labels)
        self._servers = {
            label: _Server(label, self.injector, (parts.hostname, parts.port)) for label in labels
        }
        self._threads: list[threading.Thread] = []

    def endpoint(self, label: str = "default") -> str:
        address = self._servers[label].server_address
        return f"http://{address[0]!s}:{address[1]}"

    def stats(self) -> dict[str, dict[str, Any]]:
        return self.injector.stats()

    def totals(self) -> dict[str, Any]:
        """The counts of every label added up."""
        total: dict[str, Any] = dict.fromkeys(
            ("requests", "forwarded", "retries", "retried_412", "storm_requests"), 0
        )
        faults: Counter[str] = Counter()
        for stats in self.stats().values():
            for name in total:
                total[name] += stats[name]
            faults.update(stats["faults"])
        total["faults"] = {kind: faults.get(kind, 0) for kind in FAULT_KINDS}
        return total

    def start(self) -> ChaosProxy:
        for label, server in self._servers.items():
            thread = threading.Thread(target=server.serve_forever, name=f"chaos-proxy:{label}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> ChaosProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
