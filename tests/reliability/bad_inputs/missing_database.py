"""Group 8, every command on a missing database (except those that create it): exit 1, naming the
path; ``list-dbs`` and ``cost``, which list a store prefix, list none (exit 0).
``test_catalogue_covers_every_command`` checks that :data:`ON_MISSING_DB` lists them all."""

from __future__ import annotations

from tests.reliability.bad_inputs.catalogue import NO_DB, case, cli
from tests.reliability.bad_inputs.cli_usage import SAMPLES
from tests.reliability.bad_inputs.states import build

CREATES_DB = {"create-db"}  # put/delete refuse a missing database unless --create (docs/cli.md "Safety")
LISTS_PREFIX = {"list-dbs", "cost"}  # --path is a store prefix: one without databases is an empty list
ON_MISSING_DB: dict[str, tuple[str, ...]] = {
    "put": ("k", "v"),
    "delete": ("k",),
    "create-checkpoint": (),
    "refresh-checkpoint": ("-i", SAMPLES["slate_ops.cli.args.checkpoint_id"]),
    "delete-checkpoint": ("-i", SAMPLES["slate_ops.cli.args.checkpoint_id"]),
    "list-checkpoints": (),
    "expire-checkpoints": (),
    "read-manifest": (),
    "list-manifests": (),
    "history": (),
    "list-dbs": (),
    "describe": (),
    "verify": (),
    "get": ("k",),
    "scan": (),
    "compact": (),
    "shape": (),
    "clone": ("--parent", "nope2"),
    "destroy": (),
    "gc": (),
    "create-tag": ("-n", "t1"),
    "delete-tag": ("-n", "t1"),
    "list-tags": (),
    "rollback": ("-n", "t1"),
    "apply-tag-policy": (),
    "split": ("--at", "k", "--into", "a", "--into", "b"),
    "merge": ("--source", "nope2"),
    "suggest-split-keys": ("-n", "2"),
    "flush": (),
    "restore": ("--tag", "t1", "--into", "restored"),
    "gc-health": (),
    "cost": (),
}
for name, extra in ON_MISSING_DB.items():
    if name in LISTS_PREFIX:
        case("missing database", f"CLI {name} on a prefix without databases", build,
             cli("--path", "nope", name, *extra), 0)  # fmt: skip
        continue
    missing = "nope2" if name in ("clone", "merge") else "nope"
    case(
        "missing database",
        f"CLI {name} on a missing database",
        build,
        cli("--path", "nope", name, *extra),
        1,
        NO_DB,
        missing,
    )
