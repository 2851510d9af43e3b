"""Fixtures of the CLI tests: a local store the CLI finds through ``$SLATE_OPS_STORE``."""

from __future__ import annotations

from pathlib import Path

import pytest

from slate_ops.objstore import ObjectStore, open_store


@pytest.fixture
def cli_store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL of a local store (``tmp_path/store``), set as ``$SLATE_OPS_STORE``."""
    url = (tmp_path / "store").as_uri()
    monkeypatch.setenv("SLATE_OPS_STORE", url)
    return url


@pytest.fixture
def cli_store(cli_store_url: str) -> ObjectStore:
    """The store at ``cli_store_url``, for the test's own reads and writes."""
    return open_store(cli_store_url)
