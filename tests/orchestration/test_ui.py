"""The real Dagster UI right after the demo: ``.ci/demo``, dagster-webserver, headless Chromium.

One session per module: ``.ci/demo`` runs for real on a fresh ``DAGSTER_HOME`` and store in tmp
(demo data, the database assets, the split into shards, ``maintenance_job`` on every partition),
then dagster-webserver serves that instance, and Debian's Chromium, driven by Playwright, checks
what an operator sees first, and that it agrees with what the demo did: every database's checks
green and none "Unsynced" (a clone or shard is not stale because its origin was maintained after
it), ``maintenance_job``'s Partitions tab with every partition succeeded (the demo's runs count),
the database's page, and a ``maintenance_job`` run launched from the launchpad with its partition
chosen in the partition picker, whose pre-filled config gives each op only the fields it uses.
Screenshots go to tmp; with ``SLATE_OPS_UPDATE_SCREENSHOTS=1`` they are also copied to
``docs/images/`` (the README's). Needs Debian's ``chromium`` (``apt-get install
chromium``); skipped when it is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from slate_ops.orchestration import DATABASES_JOB

# The module fixture runs the whole demo first (~1 min on a quiet machine; several under load).
# Runs .ci/demo end to end (about a minute): not in the default run; .ci/test runs `pytest -m
# "cluster or e2e"` after it.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.ui,
    pytest.mark.timeout(900),
    # Playwright's sync API drives the browser from an asyncio loop owned by the module's `ui`
    # fixture; a page call may start that loop's default-executor threads (asyncio_N) lazily, and
    # they live as long as the browser session, not the test.
    pytest.mark.leaves_threads("the module-scoped browser session's asyncio executor threads"),
]

REPO = Path(__file__).resolve().parents[2]
WEBSERVER = str(Path(sys.executable).with_name("dagster-webserver"))
LOCATION = "slate_ops"  # location_name in workspace.yaml
GROUP = "slate_ops"
# The embedded default config's fleet; .ci/demo writes demo_slatedb (a SlateDB database) when the
# slatedb extra is installed (CI installs it), which puts it in the fleet.
DATABASES = ("demo", "demo_clone", "demo_low", "demo_high") + (
    ("demo_slatedb",) if importlib.util.find_spec("slatedb") is not None else ()
)
CHECK_COUNT = 7  # slate_ops.orchestration.checks.ALL_CHECKS: verify's six and gc_health
MAIN_JOB = "maintenance_job"
PICKED = "demo_low"  # the partition the launchpad test picks
FLEET_COST = "slate_ops_fleet_cost"  # the fleet's cost asset (slate_ops.orchestration.cost_assets)
RUN_TIMEOUT_S = 180.0
WINDOW = {"width": 1400, "height": 900}
MIN_PNG_BYTES = 20_000  # a blank or spinner-only page compresses to a few KiB
SCREENSHOTS = REPO / "docs" / "images"
UPDATE_SCREENSHOTS = os.environ.get("SLATE_OPS_UPDATE_SCREENSHOTS") == "1"
# The instance of the test: no pop-up over the screenshots, no telemetry, and the default run
# coordinator, so a launched run starts at once without a daemon (the queued one needs the daemon).
# .ci/demo keeps a dagster.yaml it finds in DAGSTER_HOME.
DAGSTER_YAML = """\
nux:
  enabled: false
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: DefaultRunCoordinator
"""

RUN = """
query Run($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { status jobName tags { key value } }
    ... on Error { message }
  }
}
"""
PARTITION_STATUSES = """
query PartitionStatuses($repository: RepositorySelector!, $name: String!) {
  partitionSetOrError(repositorySelector: $repository, partitionSetName: $name) {
    __typename
    ... on PartitionSet {
      partitionStatusesOrError {
        __typename
        ... on PartitionStatuses { results { partitionName runStatus } }
      }
    }
  }
}
"""
STALE_STATUSES = """
query StaleStatuses {
  assetNodes { assetKey { path } staleStatus staleCauses { reason dependency { path } } }
}
"""
LATEST_MATERIALIZATION = """
query LatestMaterialization($assetKey: AssetKeyInput!) {
  assetOrError(assetKey: $assetKey) {
    __typename
    ... on Asset {
      assetMaterializations(limit: 1) {
        metadataEntries {
          label
          ... on MarkdownMetadataEntry { mdStr }
          ... on TextMetadataEntry { text }
          ... on FloatMetadataEntry { floatValue }
          ... on IntMetadataEntry { intValue }
        }
      }
    }
  }
}
"""
RUN_EVENTS = """
query RunEvents($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { eventType stepKey message }
        ... on ErrorEvent { error { message stack errorChain { error { message stack } } } }
      }
    }
    ... on Error { message }
  }
}
"""


@dataclass(frozen=True)
class UiSession:
    """A running webserver on the demo's instance, and a browser page to look at it with."""

    url: str
    page: Any  # playwright.sync_api.Page
    shots: Path
    log: Path
    demo_output: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _own_session_default_signals() -> None:
    # A webserver started from a background job inherits ignored SIGINT/SIGTERM; reset them so
    # the process group can be stopped.
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def graphql(url: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """POST ``query`` to the webserver's /graphql; the ``data`` of the answer (errors fail the test)."""
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.load(response)
    if answer.get("errors"):
        pytest.fail(f"GraphQL errors: {json.dumps(answer['errors'], indent=2)}")
    data: dict[str, Any] = answer["data"]
    return data


def run_events(url: str, run_id: str) -> str:
    """The run's event log as text, one event a line, errors with their stack."""
    logs = graphql(url, RUN_EVENTS, {"runId": run_id})["logsForRun"]
    if logs["__typename"] != "EventConnection":
        return str(logs)
    lines = []
    for event in logs["events"]:
        lines.append(f"{event.get('eventType')} {event.get('stepKey') or '-'}: {event.get('message')}")
        if event.get("error"):
            errors = [event["error"], *(link["error"] for link in event["error"]["errorChain"])]
            lines += [f"  caused by: {error['message'].strip()}" for error in errors[1:]]
            lines.append("".join(errors[-1]["stack"]).rstrip())  # the stack of the root cause
    return "\n".join(lines)


def wait_for_success(url: str, run_id: str, log: Path) -> dict[str, Any]:
    """Poll the run until SUCCESS (its GraphQL record); fail with its event log on FAILURE or
    CANCELED, or after the timeout."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    status = "?"
    while time.monotonic() < deadline:
        run = graphql(url, RUN, {"runId": run_id})["runOrError"]
        assert run["__typename"] == "Run", run
        status = run["status"]
        if status == "SUCCESS":
            return run
        if status in ("FAILURE", "CANCELED"):
            pytest.fail(f"run {run_id} ended {status}:\n{run_events(url, run_id)}")
        time.sleep(1)
    pytest.fail(
        f"run {run_id} still {status} after {RUN_TIMEOUT_S:.0f} s:\n{run_events(url, run_id)}\n"
        f"webserver log:\n{log.read_text()[-3000:]}"
    )


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            pytest.fail(f"dagster-webserver exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"dagster-webserver did not answer in 120 s:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


def run_demo(env: dict[str, str], log: Path) -> str:
    """``bash .ci/demo`` as a user runs it; its output (the test fails with it if the demo fails)."""
    done = subprocess.run(
        ["bash", ".ci/demo"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    log.write_text(done.stdout + done.stderr)
    assert done.returncode == 0, f"the demo failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiSession]:
    """dagster-webserver on the instance the demo just used, and a Chromium page."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium); CI installs it")
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    env = {**os.environ, "DAGSTER_HOME": str(home), "SLATE_OPS_STORE": (tmp / "store").as_uri()}
    env.pop("SLATE_OPS_CONFIG", None)  # the embedded default config: demo, its clone and shards
    demo_output = run_demo(env, tmp / "demo.log")
    port = free_port()
    log = tmp / "webserver.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [WEBSERVER, "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_own_session_default_signals,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, log)
        shots = tmp / "screenshots"
        shots.mkdir()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
            )
            try:
                page = browser.new_page(viewport=WINDOW)
                page.set_default_timeout(60_000)
                yield UiSession(url, page, shots, log, demo_output)
            finally:
                browser.close()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def visit(ui: UiSession, path: str, expected: list[str]) -> None:
    """Open ``path`` and wait until every text of ``expected`` is on the page."""
    ui.page.goto(f"{ui.url}{path}")
    for text in expected:
        try:
            ui.page.get_by_text(text).first.wait_for(state="visible")
        except Exception:  # Playwright's TimeoutError: fail with what the page shows
            body = ui.page.inner_text("body")[-2000:]
            pytest.fail(
                f"{path} never showed {text!r}; page text:\n{body}\nwebserver:\n{ui.log.read_text()[-2000:]}"
            )


def png_pixels(data: bytes) -> bytes:
    """The decompressed image data (filter bytes included) of a PNG."""
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(idat)


def screenshot(ui: UiSession, name: str) -> None:
    """Screenshot the page into ``name``; check it is a real, non-blank PNG of the window's size;
    copy it to docs/images/ when SLATE_OPS_UPDATE_SCREENSHOTS=1."""
    ui.page.mouse.move(0, WINDOW["height"] - 1)  # no tooltip over the picture
    ui.page.wait_for_timeout(500)
    target = ui.shots / name
    data = ui.page.screenshot(path=str(target))
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"
    assert struct.unpack(">II", data[16:24]) == (WINDOW["width"], WINDOW["height"])
    assert len(data) > MIN_PNG_BYTES, f"{name} is {len(data)} bytes: blank?"
    assert len(set(png_pixels(data))) > 32, f"{name} has almost no distinct colour values: blank?"
    if UPDATE_SCREENSHOTS:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, SCREENSHOTS / name)


def test_the_demo_says_how_to_reach_the_ui_and_the_automation(ui: UiSession) -> None:
    for database in DATABASES:  # one summary per maintained database
        assert re.search(
            rf"^{MAIN_JOB} of {database} \(run [0-9a-f]{{8}}, real run\): SUCCESS$", ui.demo_output, re.M
        )
    assert "Schedules and sensors start switched off" in ui.demo_output
    assert "dg dev" in ui.demo_output


def test_ui_lists_our_jobs(ui: UiSession) -> None:
    visit(ui, "/jobs", ["checkpoint_expiry_job", "compaction_job", DATABASES_JOB, MAIN_JOB])


def test_after_the_demo_every_database_shows_all_its_checks_passed(ui: UiSession) -> None:
    """The graph of the group right after the demo: demo, its clone and its shards, each with every
    check passed (maintenance, rescaling and cloning record the checks of what they change)."""
    path = f"/locations/{LOCATION}/asset-groups/{GROUP}"
    all_passed = f"{CHECK_COUNT} / {CHECK_COUNT} Passed"
    visit(ui, path, ["Asset Group in", *DATABASES, all_passed])
    ui.page.wait_for_function(
        "([text, n]) => document.body.innerText.split(text).length - 1 >= n", arg=[all_passed, len(DATABASES)]
    )
    # Each node's status row is loaded (Materialized), and none says Unsynced: the clone and the
    # shards were made before demo's last maintenance, which changed nothing they depend on.
    ui.page.wait_for_function(
        "n => document.body.innerText.split('Materialized').length - 1 >= n", arg=len(DATABASES)
    )
    body = ui.page.inner_text("body")
    assert body.count(all_passed) == len(DATABASES), body
    assert " Passed" not in body.replace(all_passed, ""), body  # no database with a check failing
    assert "Unsynced" not in body, body
    stale = {
        "/".join(node["assetKey"]["path"]): (node["staleStatus"], node["staleCauses"])
        for node in graphql(ui.url, STALE_STATUSES, {})["assetNodes"]
        if node["assetKey"]["path"] != [FLEET_COST]  # not a database: read from the event log
    }
    assert stale == {f"{GROUP}/{db}": ("FRESH", []) for db in DATABASES}, stale
    screenshot(ui, "ui-asset-graph.png")


def test_the_partitions_tab_shows_every_partition_the_demo_maintained_as_succeeded(ui: UiSession) -> None:
    """The demo launched maintenance_job on each partition from the command line; the job's
    Partitions tab counts those runs: 4 partitions, none failed, none missing, all green."""
    count = len(DATABASES)
    visit(ui, f"/locations/{LOCATION}/jobs/{MAIN_JOB}/partitions", ["Total partitions", "Missing partitions"])
    ui.page.wait_for_function(
        "text => document.body.innerText.includes(text)", arg=f"{count}\nTotal partitions"
    )
    body = ui.page.inner_text("body")
    for figure in (f"{count}\nTotal partitions", "0\nFailed partitions", "0\nMissing partitions"):
        assert figure in body, body
    repository = {"repositoryName": "__repository__", "repositoryLocationName": LOCATION}
    variables = {"repository": repository, "name": f"{MAIN_JOB}_partition_set"}
    answer = graphql(ui.url, PARTITION_STATUSES, variables)["partitionSetOrError"]
    statuses = {
        result["partitionName"]: result["runStatus"]
        for result in answer["partitionStatusesOrError"]["results"]
    }
    assert statuses == dict.fromkeys(DATABASES, "SUCCESS"), answer
    screenshot(ui, "ui-partitions.png")


def test_database_asset_page(ui: UiSession) -> None:
    """The database's page: its state and, from the demo's maintenance run, what its object-store
    requests cost per day by source (the steps before GC; GC's own are recorded after it)."""
    visit(
        ui,
        f"/assets/{GROUP}/demo",
        [
            "demo",
            "The demo database of a fresh checkout",
            "manifest_id",
            "requests_per_day",
            "request_cost_usd_per_day",
        ],
    )
    ui.page.get_by_text("requests_per_day", exact=True).first.scroll_into_view_if_needed()
    screenshot(ui, "ui-database-asset.png")  # the cost rows in the picture, not below the fold
    shown = latest_materialization(ui.url, [GROUP, "demo"])
    table = shown["requests_per_day"]
    assert "| compaction |" in table and "| checkpoints |" in table, table
    assert float(shown["request_cost_usd_per_day"]) > 0, shown


def latest_materialization(url: str, path: list[str]) -> dict[str, str]:
    """The metadata of the asset's latest materialization (label: its text, Markdown or number)."""
    answer = graphql(url, LATEST_MATERIALIZATION, {"assetKey": {"path": path}})["assetOrError"]
    assert answer["__typename"] == "Asset", answer
    (event,) = answer["assetMaterializations"] or [{"metadataEntries": []}]
    shown = {}
    for entry in event["metadataEntries"]:
        value = entry.get("mdStr") or entry.get("text") or entry.get("floatValue") or entry.get("intValue")
        shown[entry["label"]] = str(value)
    return shown


def test_the_fleet_cost_asset_lists_the_databases_by_cost(ui: UiSession) -> None:
    """The operator materializes slate_ops_fleet_cost from its page; it lists every database of the
    fleet by request cost per day (the demo's maintenance runs recorded theirs), with the sources,
    SlateDB's default polling beside ours and the price table."""
    visit(ui, f"/assets/{FLEET_COST}", [FLEET_COST, "Materialize"])
    ui.page.get_by_text("Materialize", exact=True).first.click()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    shown: dict[str, str] = {}
    while "costliest_database" not in shown:
        assert time.monotonic() < deadline, (
            f"{FLEET_COST} was not materialized:\n{ui.log.read_text()[-3000:]}"
        )
        time.sleep(1)
        shown = latest_materialization(ui.url, [FLEET_COST])
    rows = [line.split("|")[1].strip() for line in shown["databases"].splitlines()[2:]]
    assert sorted(rows) == sorted(DATABASES), shown["databases"]
    assert shown["costliest_database"] == rows[0]
    assert float(shown["fleet_cost_usd_per_day"]) > 0, shown
    assert "aws.amazon.com/s3/pricing" in shown["price_table"], shown
    visit(ui, f"/assets/{FLEET_COST}", ["costliest_database", "fleet_cost_usd_per_day", "price_table"])
    ui.page.get_by_text("Metadata", exact=True).first.scroll_into_view_if_needed()
    screenshot(ui, "ui-fleet-cost.png")


PICK_ATTEMPTS = 6
PICK_WAIT_MS = 10_000


def pick_partition(ui: UiSession, name: str) -> None:
    """Type ``name`` but its last letter into the launchpad's partition picker and click its entry.

    The picker filters the partitions it has loaded when the text changes: typed before the list
    arrived (a loaded machine), the menu stays empty, so the text is typed again, as a user would."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    picker = ui.page.get_by_placeholder("Partition")
    entry = ui.page.get_by_role("menuitem").filter(has_text=name).first
    for attempt in range(1, PICK_ATTEMPTS + 1):
        picker.click()
        picker.fill("")
        picker.fill(name[:-1])
        try:
            entry.wait_for(state="visible", timeout=PICK_WAIT_MS)
            break
        except PlaywrightTimeoutError:
            if attempt == PICK_ATTEMPTS:
                raise
    entry.click()


def test_a_partition_picked_in_the_launchpad_runs_that_database(ui: UiSession) -> None:
    """The operator's launch: maintenance_job's launchpad, the partition picker, Launch Run. The run
    carries the partition (no hand-typed tag) and maintains that database; by default it only reports."""
    visit(ui, f"/locations/{LOCATION}/jobs/{MAIN_JOB}/playground", ["Launch Run"])
    pick_partition(ui, PICKED)
    ui.page.get_by_text(f"partition: {PICKED}").first.wait_for(state="visible")
    # The config the launchpad fills in for the partition: each op only the fields it uses, so
    # the compaction executor is offered under maintenance_compact alone.
    ui.page.wait_for_function(
        "() => document.querySelector('.CodeMirror').CodeMirror.getValue().includes('ops:')"
    )
    filled = yaml.safe_load(
        ui.page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getValue()")
    )
    ops = filled["ops"]
    assert set(ops) == {
        "maintenance_expire_checkpoints",
        "maintenance_compact",
        "maintenance_tag_policy",
        "maintenance_gc",
    }, filled
    assert [op for op, op_config in ops.items() if "executor" in op_config["config"]] == [
        "maintenance_compact"
    ], ops
    assert all(op_config["config"]["dry_run"] is True for op_config in ops.values()), (
        ops
    )  # reports by default
    screenshot(ui, "ui-launchpad-partition.png")

    ui.page.get_by_role("button", name="Launch Run").click()
    ui.page.wait_for_url("**/runs/**")
    run_id = ui.page.url.rstrip("/").split("/runs/")[1].split("?")[0]
    run = wait_for_success(ui.url, run_id, ui.log)
    tags = {tag["key"]: tag["value"] for tag in run["tags"]}
    assert run["jobName"] == MAIN_JOB and tags["dagster/partition"] == PICKED
    events = run_events(ui.url, run_id)
    assert f"{PICKED}: would delete" in events, events  # the GC step reported, on the picked database
    visit(ui, f"/runs/{run_id}", [run_id[:8], "Success"])
    screenshot(ui, "ui-run.png")
