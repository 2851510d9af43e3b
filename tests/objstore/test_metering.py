"""MeteredStore counts what S3 bills (requests by kind, LIST per 1,000-key page, bytes moved) on every
kind of store, and on moto the counts equal the HTTP requests boto3 actually sent; PriceTable prices
them; bad prices and bad counts are refused."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from slate_ops.errors import InvalidArgumentError, ObjectNotFoundError
from slate_ops.objstore import CountingStore, MemoryStore, ObjectStore, PutMode, S3Store
from slate_ops.objstore.metering import (
    LIST_PAGE_KEYS,
    S3_STANDARD,
    ZERO,
    MeteredStore,
    PriceTable,
    RequestCounts,
    list_requests,
    render_requests,
)


def _workload(store: ObjectStore) -> None:
    """2 PUTs (7 + 3 bytes), 3 GETs (7 + 2 bytes read; one of a missing key), 1 HEAD, 1 LIST, 1 DELETE."""
    store.put("w/a", b"1234567")
    store.put("w/b", b"xyz", PutMode.create())
    store.get("w/a")
    store.get("w/b", (0, 2))
    store.head("w/b")
    assert [m.key for m in store.list("w/")] == ["w/a", "w/b"]
    store.delete("w/a")
    with pytest.raises(ObjectNotFoundError):
        store.get("w/a")  # a failed request is billed too


def test_counts_exact_per_kind_and_bytes(any_store: ObjectStore) -> None:
    metered = MeteredStore(any_store)
    _workload(metered)
    assert metered.counts == RequestCounts(
        get=3, head=1, put=2, list=1, delete=1, bytes_read=9, bytes_written=10
    )
    assert metered.counts.requests == 8
    before = metered.counts
    metered.get("w/b")
    assert metered.counts - before == RequestCounts(get=1, bytes_read=3)
    metered.reset()
    assert metered.counts == ZERO


def _fill(store: ObjectStore, n: int) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: store.put(f"k/{i:05d}", b""), range(n)))


def test_list_is_one_request_per_page_of_1000_keys(memory_store: MemoryStore) -> None:
    _fill(memory_store, 2 * LIST_PAGE_KEYS + 500)
    metered = MeteredStore(memory_store)
    listing = metered.list("k/")
    assert metered.counts.list == 1  # counted when made
    assert sum(1 for _ in listing) == 2500
    assert metered.counts.list == 3
    metered.reset()
    assert len(list(metered.list("k/", start_after="k/01499"))) == 1000
    assert metered.counts.list == 1  # exactly one full page: S3 says it is the last


def _http_requests(store: S3Store) -> Counter[str]:
    """Every HTTP request the store's client sends, by kind (botocore's before-send event sees each
    one, retries included): a GET with ``list-type=2`` is a LIST."""
    sent: Counter[str] = Counter()

    def count(request: Any, **_: Any) -> None:
        method = request.method.lower()
        sent["list" if method == "get" and "list-type=2" in request.url else method] += 1

    store.client.meta.events.register("before-send.s3", count)
    return sent


@pytest.mark.s3
def test_counts_equal_the_requests_boto3_sent(make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store(fresh=True)  # own client: hooks never go on the shared one
    _fill(store, LIST_PAGE_KEYS + 1)  # the fewest keys that take two pages (fewer PUTs on moto)
    sent = _http_requests(store)
    metered = MeteredStore(store)
    _workload(metered)
    assert sum(1 for _ in metered.list("k/")) == LIST_PAGE_KEYS + 1
    assert sent == Counter({k: v for k, v in metered.counts.by_kind().items() if v})
    assert sent["list"] == 1 + 2  # the workload's own, then 2 pages of 1,001 keys


def test_metering_is_thread_safe() -> None:
    metered = MeteredStore(MemoryStore())
    metered.put("k", b"ab")

    def work() -> None:
        for _ in range(300):
            metered.get("k")
            metered.head("k")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert metered.counts == RequestCounts(get=2400, head=2400, put=1, bytes_read=4800, bytes_written=2)


def test_counting_store_is_a_view_of_one_meter() -> None:
    counting = CountingStore(MemoryStore())
    _workload(counting)
    assert counting.counts == {"get": 3, "head": 1, "put": 2, "list": 1, "delete": 1}
    assert counting.total == counting.meter.counts.requests == 8
    assert counting.meter.counts.bytes_written == 10


def test_price_arithmetic() -> None:
    counts = RequestCounts(get=1000, head=1000, put=2000, list=3000, delete=5000, bytes_read=1 << 30)
    assert S3_STANDARD.cost(counts) == pytest.approx(0.0004 + 0.0004 + 0.010 + 0.015 + 0.0)
    egress = PriceTable(read_per_gb=0.09, written_per_gb=0.01)
    assert egress.cost(counts) == pytest.approx(S3_STANDARD.cost(counts) + 0.09)
    assert egress.cost(RequestCounts(bytes_written=1 << 29)) == pytest.approx(0.005)
    assert S3_STANDARD.cost(ZERO) == 0


def test_count_arithmetic_and_round_trip() -> None:
    a = RequestCounts(get=3, put=1, bytes_read=10)
    b = RequestCounts(get=1, list=2, bytes_written=5)
    assert a + b == RequestCounts(get=4, put=1, list=2, bytes_read=10, bytes_written=5)
    assert (a + b) - b == a
    assert b.scaled(144) == RequestCounts(get=144, list=288, bytes_written=720)
    assert RequestCounts.from_dict(a.to_dict()) == a
    assert RequestCounts.from_dict({"get": 2, "unknown": 9}) == RequestCounts(get=2)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_bad_counts_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="'put'"):
        RequestCounts.from_dict({"put": bad})


@pytest.mark.parametrize("bad", [-0.1, "0.005", None, float("nan")])
def test_bad_prices_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="'list_per_1000'"):
        PriceTable(list_per_1000=bad)  # type: ignore[arg-type]


def test_render_requests_line() -> None:
    counts = RequestCounts(get=12, head=1, put=3, list=2, bytes_read=4_100_000, bytes_written=1_200_000)
    assert render_requests(counts) == (
        "12 GET, 3 PUT, 2 LIST, 0 DELETE, 1 HEAD; 4.1 MB read, 1.2 MB written; $0.000030"
    )


def test_list_requests_are_one_per_page_and_one_for_nothing() -> None:
    pages = [list_requests(n) for n in (0, 1, LIST_PAGE_KEYS, LIST_PAGE_KEYS + 1, 3 * LIST_PAGE_KEYS)]
    assert pages == [1, 1, 1, 2, 3]
