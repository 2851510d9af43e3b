"""Bounded durations and time rendering that never crashes (issue 19, item 7), through ``main``.

On main before the fix, ``create-checkpoint -l 100000000000years`` and ``gc --min-age
99999999999999years`` ended in an ``OverflowError`` traceback, and an accepted ``-l 1000000years``
made ``list-checkpoints``, ``read-manifest`` and ``history`` crash with ``ValueError: year ... out of
range``. Now every duration is at most 100 years (the usage error names the maximum) and a stored
time outside the calendar renders as ``<unix seconds> (beyond year 9999)``.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slate_ops.cli import main
from slate_ops.clock import UTC_MINUTES, render_utc
from slate_ops.config import MAX_DURATION, format_duration, parse_duration
from slate_ops.errors import InvalidDurationError
from slate_ops.gc import GcOptions
from slate_ops.manifest.model import Checkpoint
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import open_store
from tests.support.stores import snapshot

U64_MAX = 2**64 - 1


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        ["create-checkpoint", "-l", "100000000000years"],
        ["create-checkpoint", "-l", "1000000years"],
        ["create-checkpoint", "-l", "100years 1s"],
        ["create-checkpoint", "-l", "9" * 400 + "ms"],
        ["refresh-checkpoint", "-i", str(uuid.uuid4()), "-l", "101years"],
        ["gc", "--min-age", "99999999999999years"],
    ],
)
def test_too_long_durations_are_usage_errors_naming_the_maximum(
    cli_store_url: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "--path", "db", "create-db")[0] == 0
    before = snapshot(open_store(cli_store_url))
    with pytest.raises(SystemExit) as raised:
        main(["--path", "db", *argv])
    err = capsys.readouterr().err
    assert raised.value.code == 2 and "maximum of 100 years" in err and "Traceback" not in err
    assert snapshot(open_store(cli_store_url)) == before


def test_the_maximum_itself_is_accepted_and_listed(
    cli_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "--path", "db", "create-db")
    code, out, _ = run(capsys, "--path", "db", "create-checkpoint", "-l", "100years")
    assert code == 0
    code, out, _ = run(capsys, "--path", "db", "list-checkpoints")
    (listed,) = json.loads(out)
    assert code == 0 and listed["expire_time"].startswith(str(datetime.now(UTC).year + 100)[:3])


def plant_expiry(store_url: str, expire_time_s: int) -> uuid.UUID:
    """A checkpoint whose stored expiry is ``expire_time_s``: what an older release or a hostile
    process may have written (the schema's field is a u64)."""
    manifests = ManifestStore(open_store(store_url), "db")
    checkpoint = Checkpoint(uuid.uuid4(), 1, 1_700_000_000, expire_time_s=expire_time_s, name="far")
    manifests.update(lambda c: c.value.with_changes(checkpoints=(*c.value.checkpoints, checkpoint)))
    return checkpoint.id


@pytest.mark.parametrize("expire_time_s", [U64_MAX, 2**63, 253402300800, 10**15])
def test_any_stored_expiry_renders(
    cli_store_url: str, expire_time_s: int, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "--path", "db", "create-db")
    plant_expiry(cli_store_url, expire_time_s)
    beyond = f"{expire_time_s} (beyond year 9999)"
    code, out, err = run(capsys, "--path", "db", "list-checkpoints")
    assert code == 0, err
    assert json.loads(out)[0]["expire_time"] == beyond
    code, out, err = run(capsys, "--path", "db", "read-manifest")
    assert code == 0 and beyond in out, err
    code, out, err = run(capsys, "--path", "db", "history")
    assert code == 0 and str(expire_time_s) in out, err
    for argv in (["list-checkpoints"], ["history"], ["describe"], ["verify"]):
        code, out, err = run(capsys, "--path", "db", *argv, "--format", "table")
        assert code in (0, 1) and "Traceback" not in err and "out of range" not in err, (argv, err)


@given(st.integers(min_value=-(2**64), max_value=2**64) | st.floats(allow_nan=True, allow_infinity=True))
def test_render_utc_never_raises(seconds: float) -> None:
    for fmt in (None, UTC_MINUTES):
        text = render_utc(seconds, fmt)
        assert isinstance(text, str) and text


def test_render_utc_in_range_is_iso() -> None:
    assert render_utc(0) == "1970-01-01T00:00:00Z"
    assert render_utc(253402300799) == "9999-12-31T23:59:59Z"
    assert render_utc(253402300800) == "253402300800 (beyond year 9999)"
    assert render_utc(-(10**12)) == "-1000000000000 (before year 1)"


@given(st.text(alphabet="0123456789 ysdhminw", min_size=1, max_size=40))
def test_parse_duration_is_bounded_or_typed(text: str) -> None:
    """Any text either parses to a duration in (0, 100 years] or raises the typed error."""
    try:
        value = parse_duration(text)
    except InvalidDurationError:
        return
    assert timedelta(0) < value <= MAX_DURATION


def test_gc_options_and_numbers_are_bounded() -> None:
    with pytest.raises(ValueError, match="maximum of 100 years"):
        GcOptions(wal_min_age=10**30)
    with pytest.raises(ValueError, match="maximum of 100 years"):
        GcOptions(wal_min_age="101years")
    assert format_duration(GcOptions(wal_min_age="100years").wal_min_age) == "36525days"


def test_times_are_rendered_by_one_function() -> None:
    """Every time shown goes through :func:`slate_ops.clock.render_utc`; the only other conversions
    of Unix seconds make data (a store's mtime, a GC report's start, a tag policy's tag name, a SlateDB
    GC report's start and objects' mtimes, a GC-health report's times, a SlateDB manifest's time)."""
    allowed = {
        "clock.py",
        "objstore/local.py",
        "gc/collector.py",
        "admin/tag_policy.py",
        "admin/handle/slatedb_handle.py",
        "admin/handle/slatedb_state.py",
        "admin/gc_health.py",
    }
    root = Path(__file__).resolve().parents[2] / "slate_ops"
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "fromtimestamp(" in path.read_text(encoding="utf-8") and str(path.relative_to(root)) not in allowed
    ]
    assert offenders == []


def test_a_tag_created_beyond_the_calendar_lists(
    cli_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "--path", "db", "create-db")
    manifests = ManifestStore(open_store(cli_store_url), "db")
    tag = Checkpoint(uuid.uuid4(), 1, U64_MAX, expire_time_s=None, name="tag:far")
    manifests.update(lambda c: c.value.with_changes(checkpoints=(*c.value.checkpoints, tag)))
    code, out, err = run(capsys, "--path", "db", "list-tags")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["tag_name"] == "far" and row["create_time"] == "9999-12-31T23:59:59Z"
    code, out, err = run(capsys, "--path", "db", "list-checkpoints")
    assert code == 0 and json.loads(out)[0]["create_time"] == f"{U64_MAX} (beyond year 9999)"
