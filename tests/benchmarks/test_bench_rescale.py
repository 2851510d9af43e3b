"""Smoke test of the rescale benchmark's harness: 1 MB and 4 MB databases, one repetition."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from benchmarks import bench_rescale as bench
from slate_ops import DbReader, ReaderOptions
from slate_ops.manifest.store import ManifestStore
from slate_ops.objstore import LocalStore
from slate_ops.objstore.wrappers import OPS

READER = ReaderOptions(manifest_poll_interval=timedelta(hours=1), checkpoint_lifetime=timedelta(hours=3))
SIZES = (1.0, 4.0)
SST_MB = 1.0  # so the 4 MB database's sorted run has several SSTs


def scan(store: LocalStore, path: str) -> list[tuple[bytes, bytes]]:
    with DbReader.open(path, store, options=READER) as reader:
        return list(reader.scan())


def test_generated_database_has_the_promised_shape(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    db = bench.build_database(store, "p/source", 4.0, SST_MB)
    manifest = ManifestStore(store, db.path).read_latest_required().value
    assert (db.l0_ssts, len(manifest.l0), len(manifest.compacted)) == (bench.L0_SSTS, bench.L0_SSTS, 1)
    assert db.run_ssts == len(manifest.compacted[0].views) == 3  # 3.5 MiB of rows in 1 MiB SSTs
    assert 0.9 * db.target_bytes < db.stored_bytes < 1.2 * db.target_bytes
    rows = scan(store, db.path)
    run_ids = {v.sst_id for v in manifest.compacted[0].views}
    assert len(rows) == sum(s.info.num_entries for s in manifest.ssts if s.id in run_ids)  # L0 overwrites
    assert [k for k, _ in rows] == sorted({k for k, _ in rows})
    assert {len(k) for k, _ in rows} == {bench.KEY_BYTES} and {len(v) for _, v in rows} == {bench.VALUE_BYTES}


def test_tiny_run_reports_both_sizes_and_copies_no_sst(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    report = bench.run(store, SIZES, sst_mb=SST_MB, repeat=1, warmup=0, prefix="p")
    labels = ["1 MB", "4 MB"]
    assert [d["label"] for d in report["databases"]] == labels
    assert [d["sorted_runs"] for d in report["databases"]] == [1, 1]
    assert report["databases"][0]["ssts"] < report["databases"][1]["ssts"]  # SST count follows size
    assert report["split_keys_from"] in (
        "slate_ops.admin.suggest_split_keys",
        "evenly spaced 8-byte prefixes",
    )
    assert set(report["operations"]) == {"split", "merge"}
    for op in report["operations"].values():
        assert set(op["by_size"]) == set(labels)
        assert {"ratio_time", "ratio_requests", "met"} <= set(op)
        for sample in op["by_size"].values():
            assert set(sample["requests"]) == {*OPS, "total"}
            assert sample["requests"]["total"] == sum(sample["requests"][k] for k in OPS) > 0
            assert sample["requests"]["put"] > 0 and sample["seconds_median"] > 0
            assert sample["sst_object_requests"] == sample["sst_object_puts"] == 0  # metadata only
            assert "compacted" not in sample["requests_by_namespace"]
            assert sample["bytes_put"] < 100_000  # manifests only, no SST bytes
    assert report["operations"]["split"]["by_size"]["4 MB"]["ssts_per_new_database"] != []
    # The merge of the shards serves exactly the source's content.
    for i in range(len(SIZES)):
        assert scan(store, f"p/size{i}/rep0/merged") == scan(store, f"p/size{i}/source")
    assert "| split | 4 MB / 1 MB |" in bench.table(report)


def test_main_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "rescale.json"
    argv = ["--sizes-mb", "1,2", "--sst-mb", "1", "--repeat", "1", "--warmup", "0", "--output", str(out)]
    code = bench.main(argv)
    report = json.loads(out.read_text())
    assert code == (0 if report["met"] else 1)
    assert report["command"].endswith("--output " + str(out)) and report["repetitions"] == 1
