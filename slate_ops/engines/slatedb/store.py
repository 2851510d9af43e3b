"""The binding's object store for a slate_ops :class:`~slate_ops.objstore.base.ObjectStore`."""

from __future__ import annotations

from typing import Any

from slate_ops.engines.slatedb.loop import binding
from slate_ops.errors import UnsupportedStoreError
from slate_ops.objstore import LocalStore
from slate_ops.objstore.base import ObjectStore
from slate_ops.objstore.wrappers import CountingStore

__all__ = ["binding_store"]


def binding_store(store: ObjectStore) -> Any:
    """The binding's ``ObjectStore`` for the same location as ``store``.

    Local directories only so far; S3 is the plan (docs/design/slatedb-engine.md, "Store
    mapping"): ``ObjectStoreBuilder.from_url("s3://bucket")`` with the endpoint, region and the
    credentials ``slate_ops.objstore.credentials`` resolves, the store's prefix joined to the path.
    """
    sdb = binding()
    while isinstance(store, CountingStore):  # counts slate_ops' own requests; the binding's are not
        store = store.inner
    if isinstance(store, LocalStore):
        builder = sdb.ObjectStoreBuilder(sdb.ObjectStoreType.LOCAL)
        builder.with_config("local_path", str(store.root))
        return builder.build()
    raise UnsupportedStoreError(
        "SlateDB databases are supported on local directories only in this version, "
        f"not {type(store).__name__}"
    )
