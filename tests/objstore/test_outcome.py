"""Puts whose outcome is unknown are settled by the put id read back, never guessed.

First with injected faults over the reference MemoryStore, then against moto through real boto3,
with botocore event hooks making the network misbehave at precise points of a real request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from slate_ops.errors import PreconditionFailedError, PutOutcomeUnknownError
from slate_ops.objstore import (
    CountingStore,
    FaultInjectingStore,
    MemoryStore,
    PutMode,
    S3Store,
    resolve_put_outcome,
)

# --- fault injection over MemoryStore -------------------------------------------------------


@pytest.fixture
def counted_memory_store() -> CountingStore:
    return CountingStore(MemoryStore())


@pytest.mark.parametrize("mode_kind", ["overwrite", "create", "if_match"])
def test_applied_put_with_lost_response_resolves_to_success(
    counted_memory_store: CountingStore, mode_kind: str
) -> None:
    faulty = FaultInjectingStore(counted_memory_store)
    mode = (
        PutMode.overwrite()
        if mode_kind != "if_match"
        else PutMode.if_match(counted_memory_store.put("k", b"v0").etag)
    )
    if mode_kind == "create":
        mode = PutMode.create()
    counted_memory_store.reset()
    faulty.fail_after("put")
    with pytest.raises(PutOutcomeUnknownError) as excinfo:
        faulty.put("k", b"v1", mode)
    put_id = excinfo.value.put_id
    assert put_id

    result = resolve_put_outcome(faulty, "k", b"v1", mode, put_id)

    assert result.put_id == put_id
    assert result.etag == counted_memory_store.head("k").etag
    assert counted_memory_store.get("k").data == b"v1"
    assert counted_memory_store.counts["put"] == 1  # read back, not written twice


def test_ambiguous_create_that_lost_to_another_writer_fails(counted_memory_store: CountingStore) -> None:
    faulty = FaultInjectingStore(counted_memory_store)
    faulty.fail("put", error=PutOutcomeUnknownError)  # never reached the store
    with pytest.raises(PutOutcomeUnknownError) as excinfo:
        faulty.put("k", b"mine", PutMode.create())
    counted_memory_store.put("k", b"theirs", PutMode.create(), put_id="their-put")

    with pytest.raises(PreconditionFailedError):
        resolve_put_outcome(faulty, "k", b"mine", PutMode.create(), excinfo.value.put_id)
    assert counted_memory_store.get("k").data == b"theirs"


def test_ambiguous_if_match_that_lost_to_another_writer_fails(counted_memory_store: CountingStore) -> None:
    etag = counted_memory_store.put("k", b"v0").etag
    faulty = FaultInjectingStore(counted_memory_store)
    faulty.fail("put", error=PutOutcomeUnknownError)
    with pytest.raises(PutOutcomeUnknownError) as excinfo:
        faulty.put("k", b"mine", PutMode.if_match(etag))
    counted_memory_store.put("k", b"theirs", PutMode.if_match(etag))

    with pytest.raises(PreconditionFailedError):
        resolve_put_outcome(faulty, "k", b"mine", PutMode.if_match(etag), excinfo.value.put_id)
    assert counted_memory_store.get("k").data == b"theirs"


@pytest.mark.parametrize("mode", [PutMode.overwrite(), PutMode.create()], ids=str)
def test_put_that_never_landed_is_retried(counted_memory_store: CountingStore, mode: PutMode) -> None:
    faulty = FaultInjectingStore(counted_memory_store)
    faulty.fail("put", error=PutOutcomeUnknownError)
    with pytest.raises(PutOutcomeUnknownError) as excinfo:
        faulty.put("k", b"data", mode)
    assert counted_memory_store.counts["put"] == 0

    result = resolve_put_outcome(faulty, "k", b"data", mode, excinfo.value.put_id)

    assert result.put_id == excinfo.value.put_id
    assert counted_memory_store.head("k").put_id == excinfo.value.put_id
    assert counted_memory_store.get("k").data == b"data"
    assert counted_memory_store.counts["put"] == 1


def test_resolution_gives_up_when_every_retry_is_ambiguous(counted_memory_store: CountingStore) -> None:
    faulty = FaultInjectingStore(counted_memory_store)
    faulty.fail("put", error=PutOutcomeUnknownError, times=None)
    with pytest.raises(PutOutcomeUnknownError):
        resolve_put_outcome(faulty, "k", b"data", PutMode.create(), "my-put", attempts=3)
    assert counted_memory_store.counts == {"get": 0, "head": 3, "put": 0, "list": 0, "delete": 0}


# --- real boto3 against moto ---------------------------------------------------------------


class Hooks:
    """Counts PutObject sends and HeadObject calls on one client, and injects one-off faults."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sends = 0
        self.heads = 0
        events = client.meta.events
        events.register("before-send.s3.PutObject", self._count_send)
        events.register("before-call.s3.HeadObject", self._count_head)

    def _count_send(self, **_: Any) -> None:
        self.sends += 1

    def _count_head(self, **_: Any) -> None:
        self.heads += 1

    def once(self, event: str, make_result: Callable[[dict[str, Any]], Any]) -> list[int]:
        """On the first ``event``, return (or raise) ``make_result(kwargs)``; later ones pass through."""
        fired: list[int] = []

        def hook(**kwargs: Any) -> Any:
            if fired:
                return None
            fired.append(1)
            return make_result(kwargs)

        self.client.meta.events.register(event, hook)
        return fired


def _raise(exc: Exception) -> Callable[[dict[str, Any]], Any]:
    def make(_: dict[str, Any]) -> Any:
        raise exc

    return make


@pytest.fixture
def fresh_store(make_s3_store: Callable[..., S3Store]) -> Iterator[Callable[..., S3Store]]:
    """S3 stores with their own client, so event hooks do not leak into other tests."""
    yield lambda max_attempts=5: make_s3_store(fresh=True, max_attempts=max_attempts)


@pytest.mark.s3
@pytest.mark.parametrize("mode_kind", ["overwrite", "create", "if_match"])
def test_s3_read_timeout_after_put_applied(fresh_store: Callable[..., S3Store], mode_kind: str) -> None:
    """The server stored the object but the client saw a timeout: reading back settles it."""
    store = fresh_store()
    mode = {"overwrite": PutMode.overwrite(), "create": PutMode.create()}.get(mode_kind)
    if mode is None:
        mode = PutMode.if_match(store.put("k", b"old").etag)
    hooks = Hooks(store.client)
    fired = hooks.once(
        "after-call.s3.PutObject", _raise(ReadTimeoutError(endpoint_url="http://moto/after-call"))
    )

    result = store.put("k", b"applied", mode, put_id="put-1")

    assert fired == [1]
    assert result.put_id == "put-1"
    assert hooks.sends == 1  # not resent: the read-back found our put id
    assert hooks.heads == 1
    head = store.head("k")
    assert head.put_id == "put-1"
    assert head.etag == result.etag
    assert store.get("k").data == b"applied"


@pytest.mark.s3
def test_s3_connect_timeout_on_create_is_retried_by_store(fresh_store: Callable[..., S3Store]) -> None:
    """With botocore retries off, the store itself settles the failed send and puts again."""
    store = fresh_store(max_attempts=1)
    hooks = Hooks(store.client)
    fired = hooks.once("before-send.s3.PutObject", _raise(ConnectTimeoutError(endpoint_url="http://moto")))

    result = store.put("k", b"landed", PutMode.create(), put_id="put-2")

    assert fired == [1]
    assert hooks.sends == 2
    assert hooks.heads == 1  # found nothing, so put again with the same id
    assert result.put_id == "put-2"
    assert store.head("k").put_id == "put-2"
    assert store.get("k").data == b"landed"


@pytest.mark.s3
def test_s3_connect_timeout_on_create_is_retried_by_botocore(fresh_store: Callable[..., S3Store]) -> None:
    """With standard retries on, botocore resends by itself and the store never needs to resolve."""
    store = fresh_store(max_attempts=3)
    hooks = Hooks(store.client)
    fired = hooks.once("before-send.s3.PutObject", _raise(ConnectTimeoutError(endpoint_url="http://moto")))

    result = store.put("k", b"landed", PutMode.create(), put_id="put-3")

    assert fired == [1]
    assert hooks.sends == 2
    assert hooks.heads == 0
    assert store.head("k").put_id == result.put_id == "put-3"


@pytest.mark.s3
def test_s3_botocore_resend_of_applied_create_is_not_a_conflict(fresh_store: Callable[..., S3Store]) -> None:
    """botocore resends a create that was applied; the resend's 412 is our own write, not a loss."""
    store = fresh_store()
    hooks = Hooks(store.client)
    # Ask botocore to retry the first (successful) attempt, as it would if its response were lost.
    fired = hooks.once("needs-retry.s3.PutObject", lambda kwargs: 0 if kwargs["response"] else None)

    result = store.put("k", b"mine", PutMode.create(), put_id="put-4")

    assert fired == [1]
    assert hooks.sends == 2
    assert hooks.heads == 1
    assert result.put_id == "put-4"
    assert store.get("k").data == b"mine"


@pytest.mark.s3
def test_s3_ambiguous_create_lost_to_another_writer(
    fresh_store: Callable[..., S3Store], s3_client: Any
) -> None:
    store = fresh_store(max_attempts=1)
    other = S3Store(store.bucket, "pfx", client=s3_client)
    hooks = Hooks(store.client)

    def rival_wins_then_timeout(_: dict[str, Any]) -> Any:
        other.put("k", b"theirs", PutMode.create(), put_id="their-put")
        raise ConnectTimeoutError(endpoint_url="http://moto")

    hooks.once("before-send.s3.PutObject", rival_wins_then_timeout)

    with pytest.raises(PreconditionFailedError):
        store.put("k", b"mine", PutMode.create(), put_id="my-put")
    assert hooks.sends == 1  # the read-back showed another put id: no resend
    assert store.head("k").put_id == "their-put"
    assert store.get("k").data == b"theirs"


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


@pytest.mark.s3
def test_s3_server_error_after_retries_is_resolved(fresh_store: Callable[..., S3Store]) -> None:
    """A 5xx may come after the write was applied; the store reads back and, finding nothing, puts again."""
    store = fresh_store(max_attempts=1)
    hooks = Hooks(store.client)
    error = b"<Error><Code>InternalError</Code><Message>injected</Message></Error>"
    fired = hooks.once(
        "before-send.s3.PutObject",
        lambda kwargs: AWSResponse(kwargs["request"].url, 500, {}, _Body(error)),
    )

    result = store.put("k", b"data", PutMode.create(), put_id="put-5")

    assert fired == [1]
    assert hooks.sends == 2
    assert hooks.heads == 1
    assert store.head("k").put_id == result.put_id == "put-5"
