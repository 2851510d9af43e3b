"""The real Dagster UI on our code location: dagster-webserver, a GraphQL-launched run, headless Chromium.

One webserver per module (own ``DAGSTER_HOME`` and store in tmp) materializes the demo database and
runs the main job through the GraphQL API, then Chromium renders the asset graph, the database's
asset page and the finished run. Screenshots go to tmp; with ``SLATE_OPS_UPDATE_SCREENSHOTS=1``
they are also copied to ``docs/images/`` (the README's). Needs Debian's ``chromium``
(``apt-get install chromium``); skipped when it is not installed.
"""

from __future__ import annotations

import json
import os
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

from slate_ops.orchestration import DATABASES_JOB, DB_TAG

pytestmark = pytest.mark.ui

REPO = Path(__file__).resolve().parents[2]
WEBSERVER = str(Path(sys.executable).with_name("dagster-webserver"))
LOCATION = "slate_ops"  # location_name in workspace.yaml
REPOSITORY = "__repository__"  # the repository Dagster builds from a Definitions object
GROUP = "slate_ops"
DB = "demo"  # the embedded default config's database (with its clone and shards)
MAIN_JOB = "maintenance_job"  # slate_ops/orchestration/maintenance.py (issue 7)
FALLBACK_JOB = DATABASES_JOB  # launched instead while the workspace has no MAIN_JOB
RUN_TIMEOUT_S = 180.0
WINDOW = (1400, 900)
MIN_PNG_BYTES = 20_000  # a blank or spinner-only page compresses to a few KiB
SCREENSHOTS = REPO / "docs" / "images"
UPDATE_SCREENSHOTS = os.environ.get("SLATE_OPS_UPDATE_SCREENSHOTS") == "1"
# The instance of the test: no pop-up over the screenshots, no telemetry, and the default run
# coordinator, so a launched run starts at once without a daemon (the queued one needs the daemon).
DAGSTER_YAML = """\
nux:
  enabled: false
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: DefaultRunCoordinator
"""
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=15000",
]

LAUNCH_RUN = """
mutation LaunchRun($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on Error { message }
  }
}
"""
RUN_STATUS = """
query RunStatus($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { status }
    ... on Error { message }
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
JOB_NAMES = """
query JobNames($selector: RepositorySelector!) {
  repositoryOrError(repositorySelector: $selector) {
    __typename
    ... on Repository { jobs { name } }
    ... on Error { message }
  }
}
"""


@dataclass(frozen=True)
class UiSession:
    """A running webserver with its finished runs, and how to render its pages."""

    url: str
    chromium: str
    profile: Path
    shots: Path
    job: str
    run_id: str
    log: Path


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


def job_names(url: str) -> set[str]:
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}
    repo = graphql(url, JOB_NAMES, {"selector": selector})["repositoryOrError"]
    assert repo["__typename"] == "Repository", repo
    return {job["name"] for job in repo["jobs"]}


def launch_run(url: str, job: str) -> str:
    """Launch ``job`` tagged with the demo database; its run id."""
    params = {
        "selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": job},
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": DB_TAG, "value": DB}]},
    }
    result = graphql(url, LAUNCH_RUN, {"executionParams": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", f"launching {job} failed: {result}"
    run_id: str = result["run"]["runId"]
    return run_id


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


def wait_for_success(url: str, run_id: str, log: Path) -> None:
    """Poll the run until SUCCESS; fail with its event log on FAILURE or CANCELED, or after the timeout."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    status = "?"
    while time.monotonic() < deadline:
        run = graphql(url, RUN_STATUS, {"runId": run_id})["runOrError"]
        assert run["__typename"] == "Run", run
        status = run["status"]
        if status == "SUCCESS":
            return
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


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiSession]:
    """dagster-webserver on the repo's workspace.yaml, after the demo database and the main job ran."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium); CI installs it")
    tmp = tmp_path_factory.mktemp("ui")
    home = tmp / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    env = {**os.environ, "DAGSTER_HOME": str(home), "SLATE_OPS_STORE": (tmp / "store").as_uri()}
    env.pop("SLATE_OPS_CONFIG", None)  # the embedded default config: demo, its clone and shards
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
        job = MAIN_JOB if MAIN_JOB in job_names(url) else FALLBACK_JOB
        # Create the database first (materializes its asset), so the main job has one to maintain.
        run_id = launch_run(url, DATABASES_JOB)
        wait_for_success(url, run_id, log)
        if job != DATABASES_JOB:
            run_id = launch_run(url, job)
            wait_for_success(url, run_id, log)
        shots = tmp / "screenshots"
        shots.mkdir()
        yield UiSession(url, chromium, tmp / "chromium", shots, job, run_id, log)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def chromium_run(ui: UiSession, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ui.chromium, *CHROMIUM_FLAGS, f"--user-data-dir={ui.profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dump_dom(ui: UiSession, path: str, expected: list[str]) -> str:
    """The rendered DOM of ``path``; retried a few times while the UI loads its data."""
    dom = ""
    for attempt in range(4):
        dom = chromium_run(ui, ["--dump-dom", f"{ui.url}{path}"]).stdout
        if all(text in dom for text in expected):
            break
        time.sleep(1 + attempt)
    missing = [text for text in expected if text not in dom]
    assert not missing, f"{path} lacks {missing}; webserver log:\n{ui.log.read_text()[-2000:]}"
    return dom


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


def screenshot(ui: UiSession, path: str, name: str) -> None:
    """Screenshot ``path`` at WINDOW into ``name`` (retried while the page is still empty); check it is
    a real, non-blank PNG; copy it to docs/images/ when SLATE_OPS_UPDATE_SCREENSHOTS=1."""
    target = ui.shots / name
    data = b""
    for attempt in range(3):
        window = f"--window-size={WINDOW[0]},{WINDOW[1]}"
        chromium_run(ui, [f"--screenshot={target}", window, f"{ui.url}{path}"])
        data = target.read_bytes() if target.exists() else b""
        if len(data) > MIN_PNG_BYTES:
            break
        time.sleep(1 + attempt)
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is not a PNG"
    assert struct.unpack(">II", data[16:24]) == WINDOW
    assert len(data) > MIN_PNG_BYTES, f"{name} is {len(data)} bytes: blank?"
    assert len(set(png_pixels(data))) > 32, f"{name} has almost no distinct colour values: blank?"
    if UPDATE_SCREENSHOTS:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, SCREENSHOTS / name)


def test_ui_lists_our_jobs(ui: UiSession) -> None:
    dump_dom(ui, "/jobs", ["checkpoint_expiry_job", "compaction_job", DATABASES_JOB, ui.job])


def test_asset_graph_shows_the_database_and_its_lineage(ui: UiSession) -> None:
    path = f"/locations/{LOCATION}/asset-groups/{GROUP}"  # the group's lineage graph
    # The embedded default's clone and shards are nodes downstream of demo.
    dump_dom(
        ui, path, ["Asset Group in", f">{DB}<", "Materialized", ">demo_clone<", ">demo_low<", ">demo_high<"]
    )
    screenshot(ui, path, "ui-asset-graph.png")


def test_database_asset_page(ui: UiSession) -> None:
    path = f"/assets/{GROUP}/{DB}"
    dom = dump_dom(ui, path, [f"{GROUP} / {DB}", DATABASES_JOB, "manifest_id"])
    assert "The demo database of a fresh checkout" in dom
    screenshot(ui, path, "ui-database-asset.png")


def test_finished_run_page(ui: UiSession) -> None:
    path = f"/runs/{ui.run_id}"
    dump_dom(ui, path, [ui.run_id, f'href="/locations/{LOCATION}/jobs/{ui.job}"', "Success"])
    screenshot(ui, path, "ui-run.png")
