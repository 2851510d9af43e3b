"""``slate-ops cost``: every database under --path by $/month with requests per day by source, beside
SlateDB's defaults; --prices, --poll-interval, --gc-interval; on a local directory and on S3."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slate_ops.admin.cost import MANIFEST_SENSORS
from slate_ops.cli import main
from slate_ops.objstore import S3_CREDENTIAL_VARIABLES
from tests.support.s3 import remove_credentials


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _seed(capsys: pytest.CaptureFixture[str], *store: str) -> None:
    for path in ("fleet/a", "fleet/b"):
        assert main([*store, "--path", path, "put", "--create", "k", "v"]) == 0
    assert main([*store, "--path", "fleet/a", "flush"]) == 0
    capsys.readouterr()


def test_cost_of_a_local_fleet(
    cli_store_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _seed(capsys)
    out = _json(capsys, "--path", "fleet", "cost")
    databases = out["databases"]
    assert isinstance(databases, list)
    assert sorted(d["path"] for d in databases) == ["fleet/a", "fleet/b"]
    ours = databases[0]["ours"]["sources"]
    assert ours["sensor_polls"]["per_pass"]["get"] == 1  # measured: one GET probe when unchanged
    assert ours["sensor_lists"]["per_pass"]["list"] == 1  # and hourly one LIST
    assert ours["sensor_polls"]["passes_per_day"] == MANIFEST_SENSORS * (86_400 / 30 - 24)
    assert ours["sensor_lists"]["passes_per_day"] == MANIFEST_SENSORS * 24
    assert ours["gc"]["passes_per_day"] == 4
    assert set(databases[0]["slatedb_defaults"]["sources"]) == {"gc", "compactor_polls", "writer_polls"}
    assert ours["writer_polls"]["passes_per_day"] == 86_400  # one writer by default
    dollars = [d["ours"]["dollars_per_month"] for d in databases]
    assert dollars == sorted(dollars, reverse=True)

    slower = _json(
        capsys, "--path", "fleet", "cost", "--poll-interval", "60s", "--gc-interval", "1h", "--json"
    )
    sources = slower["databases"][0]["ours"]["sources"]
    assert sources["sensor_lists"]["passes_per_day"] == MANIFEST_SENSORS * 1440  # too slow to probe
    assert sources["sensor_polls"]["passes_per_day"] == 0
    assert sources["gc"]["passes_per_day"] == 24

    prices = tmp_path / "prices.yaml"
    prices.write_text("list_per_1000: 0.01\n")
    dear = _json(capsys, "--path", "fleet", "cost", "--prices", str(prices))
    assert dear["prices"]["list_per_1000"] == 0.01
    by_path = {d["path"]: d for d in databases}
    for d in dear["databases"]:
        assert d["ours"]["dollars_per_month"] > by_path[d["path"]]["ours"]["dollars_per_month"]

    assert main(["cost", "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "sensor_polls" in table and "sensor_lists" in table
    assert "slatedb $/month" in table and "fleet/a" in table


def test_bad_price_file_names_file_and_field(
    cli_store_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _seed(capsys)
    prices = tmp_path / "prices.json"
    prices.write_text('{"get_per_1000": -3}')
    assert main(["cost", "--prices", str(prices)]) == 1
    err = capsys.readouterr().err
    assert "prices.json" in err and "get_per_1000" in err


def test_report_lines_show_requests(cli_store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(capsys)
    out = _json(capsys, "--path", "fleet/a", "create-checkpoint", "-l", "1h")
    assert out["requests"]["put"] >= 1
    assert main(["--path", "fleet/a", "expire-checkpoints", "--format", "table"]) == 0
    table = capsys.readouterr().out
    line = next(line for line in table.splitlines() if line.startswith("requests"))
    assert " GET, 0 PUT, " in line and " LIST, 0 DELETE, " in line and "MB read" in line and "$" in line
    assert main(["--path", "fleet/a", "gc", "--format", "table"]) == 0
    assert "requests" in capsys.readouterr().out


@pytest.mark.s3
def test_cost_on_s3(
    moto_endpoint: str,
    make_bucket: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    remove_credentials(monkeypatch)
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["access_key_id"], "k")
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["secret_access_key"], "s")
    store = ["--store", f"s3://{make_bucket()}/p?endpoint_url={moto_endpoint}&region=us-east-1"]
    _seed(capsys, *store)
    out = _json(capsys, *store, "cost")
    databases = out["databases"]
    assert isinstance(databases, list) and len(databases) == 2
    assert all(d["ours"]["sources"]["sensor_polls"]["per_pass"]["get"] == 1 for d in databases)
    assert all(d["ours"]["sources"]["sensor_lists"]["per_pass"]["list"] == 1 for d in databases)
