"""S3 credentials of Spark jobs, carried by the session's Spark configuration.

Spark tasks open the store from its URL in other processes — on a cluster, on other machines —
and ``S3Store.url`` never holds credentials. Rather than relying on every worker's environment
(``AWS_*`` variables, instance roles), the credentials are three settings of the application::

    spark.slate_ops.s3.access.key      access key id
    spark.slate_ops.s3.secret.key      secret access key
    spark.slate_ops.s3.session.token   session token (temporary credentials)

set when the session is built (the Dagster ``pyspark`` resource copies them from the ``slate``
resource; ``spark-submit --conf`` or ``spark-defaults.conf`` work too). The driver reads them
(:meth:`S3Credentials.of_session`) at the start of each job and ships them to the tasks inside the
job's closure, where :func:`~slate_ops.spark.executor._worker_store` opens the store with them.
They never become environment variables of the executors, and the key names match Spark's default
``spark.redaction.regex`` (``secret|token|access[.]?key``), so the Spark UI, the REST API and event
logs show them as ``*********(redacted)``. Unset, the driver's ``SLATE_OPS_S3_*`` variables are
shipped the same way; neither set, the workers use boto3's chain (README "S3 credentials").

A store URL in a Spark job's message goes through :func:`~slate_ops.objstore.redact_url`, the one
redaction the store, the CLI and Dagster use too (a URL given to ``bulk_load`` may carry query
credentials), and :class:`S3Credentials` leaves the secret and the token out of its ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from slate_ops.objstore import ObjectStore, open_store, resolve_s3_credentials

ACCESS_KEY_CONF = "spark.slate_ops.s3.access.key"
SECRET_KEY_CONF = "spark.slate_ops.s3.secret.key"
SESSION_TOKEN_CONF = "spark.slate_ops.s3.session.token"


@dataclass(frozen=True)
class S3Credentials:
    """S3 credentials for the stores a Spark job opens; all None: boto3's chain.

    The secret and the token are left out of ``repr`` (the object travels in task closures and may
    end up in a message).
    """

    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def of_session(cls, spark: SparkSession) -> S3Credentials:
        """The ``spark.slate_ops.s3.*`` settings of ``spark``; none set: the driver's
        ``SLATE_OPS_S3_*`` variables (:func:`~slate_ops.objstore.resolve_s3_credentials`, the order
        every entry point follows), shipped to the tasks like the settings; neither: all None, and
        the tasks use boto3's chain."""

        def setting(key: str) -> str | None:
            value = spark.conf.get(key, None)
            return value or None

        given = (setting(ACCESS_KEY_CONF), setting(SECRET_KEY_CONF), setting(SESSION_TOKEN_CONF))
        return cls(**resolve_s3_credentials(*given))

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings that carry these credentials (only the ones set)."""
        pairs = (
            (ACCESS_KEY_CONF, self.access_key_id),
            (SECRET_KEY_CONF, self.secret_access_key),
            (SESSION_TOKEN_CONF, self.session_token),
        )
        return {key: value for key, value in pairs if value}

    def open_store(self, url: str) -> ObjectStore:
        """:func:`~slate_ops.objstore.open_store` of ``url`` with these credentials (s3:// only;
        credentials in the URL's own query win)."""
        return open_store(
            url,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
            session_token=self.session_token,
        )


NO_CREDENTIALS = S3Credentials()
"""No credentials given: S3 stores use the process's ``SLATE_OPS_S3_*``, else boto3's chain."""

__all__ = ["ACCESS_KEY_CONF", "NO_CREDENTIALS", "SECRET_KEY_CONF", "SESSION_TOKEN_CONF", "S3Credentials"]
