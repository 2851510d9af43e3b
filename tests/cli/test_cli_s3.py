"""The CLI on S3 with only the documented variables (issue 20, item 7): before, with only
``SLATE_OPS_S3_ACCESS_KEY_ID`` / ``SLATE_OPS_S3_SECRET_ACCESS_KEY`` set, ``slate-ops --store s3://...``
failed with boto3's NoCredentialsError; without any credentials the one error line names them first."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest

from slate_ops.cli import main
from slate_ops.objstore import S3_CREDENTIAL_VARIABLES
from tests.support.s3 import remove_credentials

pytestmark = pytest.mark.s3


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> str:
    """moto's endpoint, with no AWS_* credentials, profile file or instance metadata to fall back to."""
    remove_credentials(monkeypatch)
    for var in [v for v in os.environ if v.startswith("SLATE_OPS_")]:  # no store or config either
        monkeypatch.delenv(var)
    return moto_endpoint


def test_the_cli_reaches_s3_with_only_the_slate_ops_variables(
    bare_env: str,
    make_bucket: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["access_key_id"], "cli-key")
    monkeypatch.setenv(S3_CREDENTIAL_VARIABLES["secret_access_key"], "cli-secret")
    store = f"s3://{make_bucket()}/fleet?endpoint_url={bare_env}&region=us-east-1"
    assert main(["--store", store, "--path", "orders", "put", "--create", "k", "v"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "--path", "orders", "get", "k"]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": "k", "value": "v"}


def test_without_credentials_the_one_line_names_the_slate_ops_variables_first(
    bare_env: str, make_bucket: Callable[[], str], capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = make_bucket()
    store = f"s3://{bucket}/fleet?endpoint_url={bare_env}&region=us-east-1"
    assert main(["--store", store, "--path", "orders", "describe"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and bucket in err
    assert err.index(S3_CREDENTIAL_VARIABLES["access_key_id"]) < err.index("AWS_ACCESS_KEY_ID")
