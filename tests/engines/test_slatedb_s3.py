"""SlateDB databases on S3 (moto's server on loopback): the binding's S3 store for a slate_ops
:class:`S3Store` (:func:`binding_store`, same bucket, endpoint, region, credentials, the store's
prefix in the binding's path), written by the binding's own Db, detected by slate_ops and
maintained through :class:`SlateDbAdmin`; effects read back with the binding."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from slate_ops.engines.detect import Engine
from slate_ops.engines.probe import probe_db
from slate_ops.engines.slatedb import LOOP, CloneSource, GcPolicy, SlateDbAdmin
from slate_ops.engines.slatedb.store import binding_path, binding_s3_config, binding_store
from slate_ops.errors import SlateDbError, UnsupportedStoreError
from slate_ops.objstore import MemoryStore, S3Store
from tests.support.s3 import CREDENTIALS
from tests.support.slatedb import read_all, write_db

pytestmark = pytest.mark.s3

SECRET = "sEcReT-p5-never-shown"  # moto accepts any credentials; this one must never be printed


def raw_keys(store: S3Store) -> list[str]:
    """Every key in the store's bucket, prefix included (boto3 directly)."""
    out = store.client.list_objects_v2(Bucket=store.bucket).get("Contents", [])
    return sorted(o["Key"] for o in out)


def test_a_database_written_on_s3_is_found_under_the_prefix_detected_and_maintained(
    sdb: Any, make_s3_store: Callable[..., S3Store]
) -> None:
    store = make_s3_store("tenant/a")
    assert binding_path(store, "dbs/x") == "tenant/a/dbs/x"
    expected = LOOP.run(
        write_db(sdb, None, binding_path(store, "dbs/x"), rounds=2, keys=40, store=binding_store(store))
    )
    keys = raw_keys(store)
    assert keys and all(k.startswith("tenant/a/dbs/x/") for k in keys)  # nowhere else in the bucket
    assert any("/manifest/" in k for k in keys) and any("/compacted/" in k for k in keys)

    probe = probe_db("dbs/x", store)  # slate_ops' own listing and GET, through the prefix
    assert probe.detection.engine is Engine.SLATEDB and probe.detection.supported

    db = SlateDbAdmin("dbs/x", store)
    m = db.read_manifest()
    assert m is not None and m.id == probe.manifest_id
    cp, _ = db.create_checkpoint(lifetime_s=600, name="s3-read")
    assert [c.id for c in db.list_checkpoints("s3-read")] == [cp]
    # read back with the binding's DbReader at that checkpoint, in a fresh binding store
    got = LOOP.run(read_all(sdb, None, binding_path(store, "dbs/x"), cp, store=binding_store(store)))
    assert got == expected
    db.delete_checkpoint(cp)
    assert db.list_checkpoints("s3-read") == []


def test_gc_plan_equals_run_on_s3(sdb: Any, make_s3_store: Callable[..., S3Store]) -> None:
    store = make_s3_store()
    LOOP.run(
        write_db(
            sdb, None, binding_path(store, "db"), rounds=3, keys=30, compact=True, store=binding_store(store)
        )
    )
    db = SlateDbAdmin("db", store)
    for c in db.list_checkpoints():  # the writer's compactor's checkpoint would pin the garbage
        db.delete_checkpoint(c.id)
    time.sleep(0.05)
    policy = GcPolicy(manifest=0.001, wal=0.001, compacted=0.001, compactions=0.001)
    before = db.list_objects()
    plan = db.gc_plan(policy)
    assert db.list_objects() == before  # the plan only lists and reads
    assert plan.deletions and {d.directory for d in plan.deletions} >= {"manifest", "compacted"}
    report = db.run_gc(plan)
    assert report.matches_plan, (report.unplanned, report.not_deleted)
    assert set(report.deleted) == plan.keys()
    assert not plan.keys() & set(db.list_objects())


def test_destroy_dry_run_names_store_keys_and_deletes_nothing(
    sdb: Any, make_s3_store: Callable[..., S3Store]
) -> None:
    store = make_s3_store("p")
    LOOP.run(write_db(sdb, None, binding_path(store, "db"), rounds=1, keys=10, store=binding_store(store)))
    db = SlateDbAdmin("db", store)
    before = db.list_objects()
    would = db.delete_db(confirm=False)
    assert set(would) == set(before)  # keys as the store names them: without the prefix
    assert db.list_objects() == before
    done = db.delete_db(confirm=True)
    assert set(before) <= set(done)
    assert raw_keys(store) == []


def test_credentials_are_the_ones_slate_ops_resolves_and_never_shown(
    sdb: Any,
    moto_endpoint: str,
    s3_client: Any,
    make_bucket: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No client given: the store resolves SLATE_OPS_S3_* (before boto3's chain, whose AWS_* hold
    # other dummy credentials), and the binding signs with the same ones.
    monkeypatch.setenv("SLATE_OPS_S3_ACCESS_KEY_ID", "AKIAP5EXAMPLE")
    monkeypatch.setenv("SLATE_OPS_S3_SECRET_ACCESS_KEY", SECRET)
    bucket = make_bucket()
    store = S3Store(bucket, "pfx", endpoint_url=moto_endpoint, region=CREDENTIALS["region"])
    config = binding_s3_config(store)
    assert (config.access_key_id, config.secret_access_key) == ("AKIAP5EXAMPLE", SECRET)
    assert config.endpoint == moto_endpoint and config.region == "us-east-1" and config.bucket == bucket
    entries = dict(config.entries())
    assert entries["aws_allow_http"] == "true" and entries["aws_virtual_hosted_style_request"] == "false"
    assert SECRET not in repr(config)

    caplog.set_level(logging.DEBUG)
    expected = LOOP.run(
        write_db(sdb, None, binding_path(store, "db"), rounds=1, keys=5, store=binding_store(store))
    )
    assert SlateDbAdmin("db", store).read_manifest() is not None
    assert LOOP.run(read_all(sdb, None, binding_path(store, "db"), store=binding_store(store))) == expected

    # A refused call names the database and the operation, never the secret.
    with pytest.raises(SlateDbError) as err:
        SlateDbAdmin("db", store).refresh_checkpoint(str(uuid.uuid4()), 60)
    assert "SlateDB database db" in str(err.value) and "refresh_checkpoint" in str(err.value)
    assert SECRET not in str(err.value) and SECRET not in repr(err.value)
    assert SECRET not in caplog.text


def test_a_clone_on_s3_with_a_prefix_reads_its_source_and_names_it_store_relative(
    sdb: Any, make_s3_store: Callable[..., S3Store]
) -> None:
    store = make_s3_store("tenant/b")
    expected = LOOP.run(
        write_db(sdb, None, binding_path(store, "src"), rounds=2, keys=20, store=binding_store(store))
    )
    source = SlateDbAdmin("src", store)
    cp, _ = source.create_checkpoint(lifetime_s=600)
    clone = SlateDbAdmin("copy", store)
    m = clone.clone_from([CloneSource("src", checkpoint=cp)])
    assert [e.path for e in m.external_dbs] == ["src"]  # the binding records "tenant/b/src"
    got = LOOP.run(read_all(sdb, None, binding_path(store, "copy"), store=binding_store(store)))
    assert got == expected
    assert all(k.startswith("tenant/b/") for k in raw_keys(store))


def test_an_in_memory_store_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedStoreError, match="MemoryStore"):
        binding_store(MemoryStore("p5-mem"))


def test_temporary_credentials_carry_their_token_and_aws_needs_no_endpoint(moto_endpoint: str) -> None:
    from slate_ops.objstore.s3 import make_s3_client

    temporary = make_s3_client(
        endpoint_url=moto_endpoint,
        access_key_id="ASIAP5",
        secret_access_key=SECRET,
        session_token="tok-p5",
        region="eu-west-1",
    )
    entries = dict(binding_s3_config(S3Store("some-bucket", client=temporary)).entries())
    assert entries["aws_token"] == "tok-p5" and entries["aws_access_key_id"] == "ASIAP5"
    assert entries["aws_region"] == "eu-west-1"
    aws = make_s3_client(access_key_id="AKIAP5", secret_access_key=SECRET, region="eu-west-1")
    config = binding_s3_config(S3Store("some-bucket", client=aws))
    assert config.endpoint is None  # AWS itself: object_store derives the endpoint from the region
    assert "aws_endpoint" not in dict(config.entries()) and "aws_allow_http" not in dict(config.entries())
