"""The real Dagster UI loads our code location: dagster-webserver plus headless Chromium.

Needs Debian's ``chromium`` (``apt-get install chromium``); skipped when it is not installed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.ui

REPO = Path(__file__).resolve().parents[2]
WEBSERVER = str(Path(sys.executable).with_name("dagster-webserver"))
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",
]


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


@pytest.fixture
def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium); CI installs it")
    return found


@pytest.fixture
def webserver(tmp_path: Path) -> Iterator[str]:
    """dagster-webserver on the repo's workspace.yaml (embedded default config) on a free port."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    # No newsletter pop-up over the screenshot, no telemetry traffic.
    (home / "dagster.yaml").write_text("nux:\n  enabled: false\ntelemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "SLATE_OPS_STORE": (tmp_path / "store").as_uri()}
    port = free_port()
    log_path = tmp_path / "webserver.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [WEBSERVER, "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_own_session_default_signals,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"dagster-webserver exited with {process.returncode}:\n{log_path.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"dagster-webserver did not answer in 120 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def chromium_run(chromium: str, profile: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dump_dom(chromium: str, profile: Path, url: str, expected: list[str]) -> str:
    """The rendered DOM of ``url``; retried a few times in case the UI had not loaded its data yet."""
    dom = ""
    for _ in range(3):
        dom = chromium_run(chromium, profile, ["--dump-dom", url]).stdout
        if all(text in dom for text in expected):
            break
    return dom


def test_ui_lists_our_jobs_and_assets(chromium: str, webserver: str, tmp_path: Path) -> None:
    profile = tmp_path / "chromium"
    expected_jobs = ["checkpoint_expiry_job", "compaction_job", "slate_ops_databases_job"]
    jobs = dump_dom(chromium, profile, f"{webserver}/jobs", expected_jobs)
    for job in expected_jobs:
        assert job in jobs

    assets = dump_dom(chromium, profile, f"{webserver}/assets", ['href="/assets/slate_ops/demo"'])
    assert 'href="/assets/slate_ops/demo"' in assets
    assert "slate_ops / demo" in assets
    assert "The demo database of a fresh checkout" in assets

    screenshot = tmp_path / "ui.png"
    chromium_run(
        chromium, profile, [f"--screenshot={screenshot}", "--window-size=1400,900", f"{webserver}/assets"]
    )
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1400, 900)
    assert len(data) > 20_000, "a blank page compresses to a few KiB"
