"""S3 credentials: the one order every entry point follows (README "S3 credentials").

1. credentials given explicitly: the store URL's ``access_key_id`` / ``secret_access_key`` /
   ``session_token`` options, or the same arguments of :func:`~slate_ops.objstore.open_store` (the
   Dagster resources' credential fields, the Spark session's ``spark.slate_ops.s3.*`` settings);
2. else the variables ``SLATE_OPS_S3_ACCESS_KEY_ID``, ``SLATE_OPS_S3_SECRET_ACCESS_KEY`` and
   ``SLATE_OPS_S3_SESSION_TOKEN`` (:data:`S3_CREDENTIAL_VARIABLES`);
3. else boto3's own chain (``AWS_*`` variables, ``AWS_PROFILE``, instance roles).

A source is taken whole: credentials are never assembled from pieces of two sources (a key id from
one and a secret from another would be a pair nobody gave). :func:`resolve_s3_credentials` is the
one implementation; :class:`~slate_ops.objstore.S3Store` calls it, so the CLI, ``.ci/demo``, Spark's
driver and tasks and Dagster's runs all get the same answer from the same environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from slate_ops.errors import InvalidArgumentError

S3_CREDENTIAL_VARIABLES: Mapping[str, str] = {
    "access_key_id": "SLATE_OPS_S3_ACCESS_KEY_ID",
    "secret_access_key": "SLATE_OPS_S3_SECRET_ACCESS_KEY",
    "session_token": "SLATE_OPS_S3_SESSION_TOKEN",
}
"""The environment variable of each credential (by its ``open_store`` argument name)."""


def resolve_s3_credentials(
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    session_token: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str | None]:
    """The credentials an S3 store uses, as ``open_store`` arguments; all None means boto3's chain.

    Any explicit credential given: exactly those. Else the ``SLATE_OPS_S3_*`` variables of
    ``environ`` (default ``os.environ``; an empty value counts as unset). A key id without its secret
    (or the reverse) among the variables raises :class:`InvalidArgumentError` naming the variable
    to set.
    """
    given = {
        "access_key_id": access_key_id,
        "secret_access_key": secret_access_key,
        "session_token": session_token,
    }
    if any(value is not None for value in given.values()):
        return given
    env = os.environ if environ is None else environ
    found = {name: env.get(variable) or None for name, variable in S3_CREDENTIAL_VARIABLES.items()}
    key_id, secret = found["access_key_id"], found["secret_access_key"]
    if (key_id is None) != (secret is None):
        have, missing = ("access_key_id", "secret_access_key")
        if key_id is None:
            have, missing = missing, have
        raise InvalidArgumentError(
            f"S3 credentials: {S3_CREDENTIAL_VARIABLES[have]} is set without "
            f"{S3_CREDENTIAL_VARIABLES[missing]}; set both (plus {S3_CREDENTIAL_VARIABLES['session_token']} "
            "for temporary credentials), or neither to use boto3's chain (AWS_* variables, profiles, roles)"
        )
    if key_id is None and found["session_token"] is not None:
        raise InvalidArgumentError(
            f"S3 credentials: {S3_CREDENTIAL_VARIABLES['session_token']} is set without "
            f"{S3_CREDENTIAL_VARIABLES['access_key_id']} and {S3_CREDENTIAL_VARIABLES['secret_access_key']}; "
            "set all three, or unset it to use boto3's chain"
        )
    return found


__all__ = ["S3_CREDENTIAL_VARIABLES", "resolve_s3_credentials"]
