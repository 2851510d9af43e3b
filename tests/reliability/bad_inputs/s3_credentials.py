"""Group 9, S3 credentials: none at all, refused ones (moto with IAM checks on), an access key without
its secret, a missing bucket."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slate_ops import Db, DbReader, admin
from slate_ops.cli import main
from slate_ops.errors import InvalidStoreUrlError, ObjectStoreCredentialsError, ObjectStoreError
from slate_ops.objstore import S3_CREDENTIAL_VARIABLES, S3Store, open_store
from tests.reliability.bad_inputs.catalogue import QUIET_READER, Cli, Env, case, cli
from tests.reliability.bad_inputs.states import build, nothing
from tests.support.s3 import CREDENTIALS

S3 = (pytest.mark.s3,)
SET_KEYS = "SLATE_OPS_S3_ACCESS_KEY_ID"  # named first, before boto3's AWS_* (README "S3 credentials")


def s3_store(env: Env, *, credentials: dict[str, str] | None = None, bucket: str | None = None) -> None:
    """The case's store is an S3 bucket on moto, opened by URL with ``credentials`` (None: none at
    all, from an environment without any); snapshots list it with good credentials."""
    endpoint: str = env.request.getfixturevalue("moto_endpoint")
    client = env.request.getfixturevalue("s3_client")
    name = bucket or env.request.getfixturevalue("make_bucket")()
    env.vars["bucket"] = name
    query = f"endpoint_url={endpoint}&region=us-east-1"
    if credentials is None:
        for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            env.monkeypatch.delenv(variable, raising=False)
        for variable in S3_CREDENTIAL_VARIABLES.values():  # read before boto3's chain
            env.monkeypatch.delenv(variable, raising=False)
        env.monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata probing
    else:
        query += "".join(f"&{k}={v}" for k, v in credentials.items())
    env.vars["url"] = f"s3://{name}/pfx?{query}"
    if bucket is None:  # else there is nothing to list: the bucket does not exist
        good = S3Store(name, "pfx", client=client)
        build(Env(good, env.request, env.monkeypatch))
        env.listing = env.store = good


WRONG = {"access_key_id": "AKIAWRONGWRONGWRONG", "secret_access_key": "wrong"}


def no_credentials(env: Env) -> None:
    s3_store(env)


def wrong_credentials(env: Env) -> None:
    s3_store(env, credentials=WRONG)


def with_iam(action: Callable[[Env], object] | Cli) -> Callable[[Env], object]:
    """Run ``action`` while moto checks credentials (by default it accepts any)."""
    from moto.core.authorization import enable_iam_authentication

    def run(env: Env) -> object:
        with enable_iam_authentication():
            if isinstance(action, Cli):
                raise SystemExit(main(action.resolve(env)))
            return action(env)

    return run


case(
    "S3 credentials",
    "no credentials: describe_db",
    no_credentials,
    lambda env: admin.describe_db("db", open_store(env.url)),
    ObjectStoreCredentialsError,
    "{bucket}",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "no credentials: Db.open",
    no_credentials,
    lambda env: Db.open("db", open_store(env.url)),
    ObjectStoreCredentialsError,
    "{bucket}",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "no credentials: CLI get",
    no_credentials,
    cli("--path", "db", "get", "k01"),
    1,
    "{bucket}",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "wrong credentials: create_db",
    wrong_credentials,
    with_iam(lambda env: admin.create_db("db2", open_store(env.url))),
    ObjectStoreCredentialsError,
    "{bucket}",
    "refused the credentials",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "wrong credentials: DbReader",
    wrong_credentials,
    with_iam(lambda env: DbReader.open("db", open_store(env.url), options=QUIET_READER)),
    ObjectStoreCredentialsError,
    "{bucket}",
    "refused the credentials",
    marks=S3,
)
case(
    "S3 credentials",
    "wrong credentials: CLI put",
    wrong_credentials,
    with_iam(cli("--path", "db", "put", "k", "v")),
    1,
    "{bucket}",
    "refused the credentials",
    SET_KEYS,
    marks=S3,
)
case(
    "S3 credentials",
    "access key without secret",
    nothing,
    lambda env: open_store("s3://bkt/pfx?access_key_id=AKIAONLY"),
    InvalidStoreUrlError,
    "bkt",
    "without secret_access_key",
    "give both",
)
case(
    "S3 credentials",
    "missing bucket",
    lambda env: s3_store(
        env,
        credentials=dict(
            access_key_id=CREDENTIALS["access_key_id"], secret_access_key=CREDENTIALS["secret_access_key"]
        ),
        bucket="no-such-bucket",
    ),
    lambda env: admin.describe_db("db", open_store(env.url)),
    ObjectStoreError,
    "no-such-bucket",
    "does not exist",
    marks=S3,
)
