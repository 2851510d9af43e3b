"""The chaos soak on S3 (issue 8) and the fault-injecting proxy it runs behind.

``pytest tests/reliability/test_soak.py`` runs the proxy checks (default run);
``pytest -m e2e tests/reliability/test_soak.py`` the ~30 s soak of four processes (CI's second step);
``SLATE_OPS_SOAK_SECONDS=600 pytest -m slow -k long tests/reliability/test_soak.py -s`` runs the long
soak (default 600 s) and prints its report; ``SLATE_OPS_SOAK_REPORT=path.json`` also writes the report
as JSON. Without pytest: ``python -m tests.reliability.soak --duration 600`` (see ``--help``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from slate_ops.errors import ObjectNotFoundError, ObjectStoreError, PreconditionFailedError
from slate_ops.objstore import PutMode, S3Store
from slate_ops.objstore.s3 import make_s3_client
from tests.reliability.chaos_proxy import (
    FAULT_KINDS,
    LATENCY,
    RESET_AFTER_APPLY,
    RESET_BEFORE_FORWARD,
    RESET_MID_REQUEST,
    RESET_MID_RESPONSE,
    SLOWDOWN_503,
    THROTTLE_429,
    ChaosProxy,
    FaultRates,
)
from tests.reliability.soak import ROLES, SoakConfig, SoakReport, WriteLog, check_final, run_soak, value_of
from tests.support.s3 import CREDENTIALS

CI_SECONDS = 30.0


@pytest.fixture(scope="module")
def proxy(moto_endpoint: str) -> Iterator[ChaosProxy]:
    with ChaosProxy(moto_endpoint, FaultRates.none(), seed=1) as started:
        yield started


@pytest.fixture(scope="module")
def client(proxy: ChaosProxy) -> Any:
    return make_s3_client(endpoint_url=proxy.endpoint(), **CREDENTIALS)


def counted(proxy: ChaosProxy, work: Callable[[], object]) -> dict[str, Any]:
    """What the proxy saw while ``work`` ran."""
    before = proxy.stats()["default"]
    work()
    after = proxy.stats()["default"]
    return {
        "retries": after["retries"] - before["retries"],
        "retried_412": after["retried_412"] - before["retried_412"],
        "faults": {k: after["faults"][k] - before["faults"][k] for k in FAULT_KINDS},
        "puts": after["by_method"].get("PUT", 0) - before["by_method"].get("PUT", 0),
    }


@pytest.mark.s3
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_every_fault_on_a_conditional_put_is_survived(
    proxy: ChaosProxy, client: Any, make_bucket: Callable[[], str], kind: str
) -> None:
    store = S3Store(make_bucket(), "pfx", client=client)

    def put() -> None:
        proxy.injector.force(kind, method="PUT")
        result = store.put("k", b"data", PutMode.create())
        assert store.head("k").put_id == result.put_id

    seen = counted(proxy, put)
    assert store.get("k").data == b"data"
    assert seen["faults"][kind] == 1 and sum(seen["faults"].values()) == 1
    # every fault but latency fails the first attempt, which botocore retries (a put's answer has
    # no body, so a reset in the middle of it is a reset before it)
    assert seen["retries"] == (0 if kind == LATENCY else 1)
    if kind == RESET_AFTER_APPLY:  # applied, response lost: the retry meets our own object (412)
        assert seen["puts"] == 2 and seen["retried_412"] == 1


@pytest.mark.s3
@pytest.mark.parametrize(
    ("kind", "method"),
    [
        (RESET_AFTER_APPLY, "GET"),
        (RESET_MID_REQUEST, "HEAD"),
        (RESET_BEFORE_FORWARD, "DELETE"),
        (RESET_AFTER_APPLY, "DELETE"),
        (SLOWDOWN_503, "HEAD"),
    ],
)
def test_reads_and_deletes_are_retried_through_faults(
    proxy: ChaosProxy, client: Any, make_bucket: Callable[[], str], kind: str, method: str
) -> None:
    store = S3Store(make_bucket(), "pfx", client=client)
    store.put("k", b"data")

    def call() -> None:
        proxy.injector.force(kind, method=method)
        if method == "GET":
            assert store.get("k").data == b"data"
        elif method == "HEAD":
            assert store.head("k").size == 4
        else:
            store.delete("k")
            assert not list(store.list())

    assert counted(proxy, call)["retries"] == 1


@pytest.mark.s3
def test_a_get_whose_body_is_cut_off_fails_and_is_never_taken_as_data(
    proxy: ChaosProxy, client: Any, make_bucket: Callable[[], str]
) -> None:
    store = S3Store(make_bucket(), "pfx", client=client)
    store.put("k", b"0123456789" * 100)
    proxy.injector.force(RESET_MID_RESPONSE, method="GET")
    with pytest.raises(ObjectStoreError, match="S3 get of"):
        store.get("k")  # botocore retries the request, not the reading of its body
    assert store.get("k").data == b"0123456789" * 100


@pytest.mark.s3
def test_a_cut_off_error_or_listing_body_is_a_typed_store_error(
    proxy: ChaosProxy, client: Any, make_bucket: Callable[[], str]
) -> None:
    """Regression (found by the soak): botocore reads the body of an error answer outside its
    exception handling, so a connection reset in the middle of one escaped S3Store as urllib3's
    ProtocolError — not a SlateOpsError — and killed a compactor that retries store errors."""
    store = S3Store(make_bucket(), "pfx", client=client)
    store.put("k", b"data")
    proxy.injector.force(RESET_MID_RESPONSE, method="GET")
    with pytest.raises(ObjectStoreError) as raised:
        store.get("missing")  # a 404 whose XML body is cut off: absence is not proven
    assert not isinstance(raised.value, ObjectNotFoundError)
    proxy.injector.force(RESET_MID_RESPONSE, method="GET", path_contains="list-type")
    assert [m.key for m in store.list()] == ["k"]  # a cut-off listing (200) botocore retries
    proxy.injector.force(RESET_MID_RESPONSE, method="PUT")
    with pytest.raises(PreconditionFailedError):  # a 412 cut off: settled by reading back
        store.put("k", b"other", PutMode.create())
    assert store.get("k").data == b"data" and [m.key for m in store.list()] == ["k"]


@pytest.mark.s3
@pytest.mark.parametrize(
    ("kind", "status", "code"), [(SLOWDOWN_503, 503, "SlowDown"), (THROTTLE_429, 429, "TooManyRequests")]
)
def test_error_responses_are_s3_xml_errors(
    proxy: ChaosProxy, make_bucket: Callable[[], str], kind: str, status: int, code: str
) -> None:
    bucket = make_bucket()
    once = make_s3_client(endpoint_url=proxy.endpoint(), max_attempts=1, **CREDENTIALS)
    proxy.injector.force(kind)
    with pytest.raises(ClientError) as raised:
        once.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert raised.value.response["Error"]["Code"] == code
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert not once.list_objects_v2(Bucket=bucket).get("Contents")  # never reached moto


def test_fault_draws_are_seeded_and_follow_the_rates() -> None:
    from tests.reliability.chaos_proxy import FaultInjector

    rates = replace(FaultRates.none(), slowdown_503=0.2, throttle_429=0.1, reset_after_apply=0.1, latency=0.2)

    def draws(seed: int) -> list[str | None]:
        injector = FaultInjector(rates, seed, ["a"])
        return [injector.decide("a", "GET", "/", 1)[0] for _ in range(2000)]

    first = draws(5)
    assert first == draws(5) and first != draws(6)
    share = {kind: first.count(kind) / len(first) for kind in FAULT_KINDS}
    assert abs(share[SLOWDOWN_503] - 0.2) < 0.04 and abs(share[LATENCY] - 0.2) < 0.04
    assert share[RESET_MID_REQUEST] == 0


def test_the_final_check_finds_lost_and_phantom_writes() -> None:
    """The soak's verdict is only worth something if it can fail: feed it a damaged outcome."""
    size = (10, 20)
    log = WriteLog()
    for n, (op, key) in enumerate([("p", b"a"), ("p", b"b"), ("p", b"a"), ("d", b"c"), ("p", b"d")], 1):
        log.attempts.setdefault(key, {})[n] = op
        if n != 5:  # write 5 (to d) was attempted, never acknowledged
            log.last_acked[key] = (n, op)
    good = {b"a": value_of(b"a", 3, size), b"b": value_of(b"b", 2, size)}
    assert not check_final(log, good.get, good).lost
    survived = {**good, b"d": value_of(b"d", 5, size)}  # an unacknowledged write that became durable
    assert check_final(log, survived.get, survived).lost == []
    stale = {**good, b"a": value_of(b"a", 1, size)}  # the acknowledged write 3 went missing
    assert len(check_final(log, stale.get, stale).lost) == 1
    gone = {b"a": good[b"a"]}  # b vanished
    assert len(check_final(log, gone.get, gone).lost) == 1
    alien = {**good, b"e": value_of(b"e", 9, size), b"b": value_of(b"a", 2, size)}
    assert len(check_final(log, alien.get, alien).phantoms) == 2


def run_and_report(moto_endpoint: str, bucket: str, tmp_path: Path, config: SoakConfig) -> SoakReport:
    report = run_soak(moto_endpoint, bucket, config, tmp_path / "soak", progress=print)
    print(report.summary())
    target = os.environ.get("SLATE_OPS_SOAK_REPORT")
    if target:
        Path(target).write_text(json.dumps(report.as_dict(), indent=1, default=str))
    return report


def assert_sound(report: SoakReport) -> None:
    assert report.ok, report.summary()
    assert report.lost_writes == [] and report.phantom_values == [] and report.verify_problems == []
    ops: dict[str, dict[str, Any]] = {role: report.actors[role]["ops"] for role in ROLES}
    assert report.writes_acknowledged > 200, ops["writer"]
    assert ops["writer"].get("crashes", 0) >= 1 and ops["writer"].get("clean_closes", 0) >= 1
    assert ops["reader"]["gets"] > 1000 and ops["reader"]["scans"] > 0
    assert ops["compactor"].get("compactions", 0) >= 1, ops["compactor"]
    assert ops["gc"].get("runs", 0) + ops["gc"].get("failed_runs", 0) >= 5, ops["gc"]
    assert sum(v for k, v in ops["gc"].items() if k.startswith("deleted_")) > 0, ops["gc"]
    assert all(report.totals["faults"][kind] > 0 for kind in FAULT_KINDS), report.totals
    assert report.totals["retries"] > 0


@pytest.mark.s3
@pytest.mark.e2e  # writer, reader, compactor and GC processes for 30 s: CI's second step
@pytest.mark.slow
def test_chaos_soak(moto_endpoint: str, make_bucket: Callable[[], str], tmp_path: Path) -> None:
    report = run_and_report(moto_endpoint, make_bucket(), tmp_path, SoakConfig(duration_s=CI_SECONDS))
    assert_sound(report)


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.timeout(0)
def test_chaos_soak_long(moto_endpoint: str, make_bucket: Callable[[], str], tmp_path: Path) -> None:
    seconds = float(os.environ.get("SLATE_OPS_SOAK_SECONDS", "600"))
    seed = int(os.environ.get("SLATE_OPS_SOAK_SEED", "1"))
    report = run_and_report(moto_endpoint, make_bucket(), tmp_path, SoakConfig(duration_s=seconds, seed=seed))
    assert_sound(report)
