"""Object stores: one protocol (:class:`ObjectStore`) over memory, a local filesystem and S3."""

from slate_ops.objstore.base import (
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutMode,
    PutResult,
    resolve_put_outcome,
)
from slate_ops.objstore.credentials import S3_CREDENTIAL_VARIABLES, resolve_s3_credentials
from slate_ops.objstore.local import LocalStore
from slate_ops.objstore.memory import MemoryStore
from slate_ops.objstore.s3 import S3Store
from slate_ops.objstore.url import HARMLESS_OPTIONS, open_store, redact_url
from slate_ops.objstore.wrappers import CountingStore, FaultInjectingStore

__all__ = [
    "HARMLESS_OPTIONS",
    "S3_CREDENTIAL_VARIABLES",
    "CountingStore",
    "FaultInjectingStore",
    "GetResult",
    "LocalStore",
    "MemoryStore",
    "ObjectMeta",
    "ObjectStore",
    "PutMode",
    "PutResult",
    "S3Store",
    "open_store",
    "redact_url",
    "resolve_put_outcome",
    "resolve_s3_credentials",
]
