"""Group 5, checkpoints: unknown and expired checkpoint ids wherever one is accepted, and an id given as
text."""

from __future__ import annotations

import uuid

from slate_ops import DbReader, admin
from slate_ops.config import CheckpointOptions
from slate_ops.errors import CheckpointExpiredError, CheckpointNotFoundError, InvalidArgumentError
from tests.reliability.bad_inputs.actions import read_all
from tests.reliability.bad_inputs.catalogue import QUIET_READER, Env, case, cli
from tests.reliability.bad_inputs.states import with_checkpoints

group = "checkpoints"
UNKNOWN_FIX = "list-checkpoints"
EXPIRED_FIX = "create a new one"
for which, error, fix in [
    ("unknown", CheckpointNotFoundError, UNKNOWN_FIX),
    ("expired", CheckpointExpiredError, EXPIRED_FIX),
]:
    ref = "{" + which + "}"

    def the_id(env: Env, ref: str = ref) -> uuid.UUID:
        return uuid.UUID(env.format(ref))

    case(
        group,
        f"DbReader at an {which} checkpoint",
        with_checkpoints,
        read_all(checkpoint=ref),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"create_checkpoint from an {which} source",
        with_checkpoints,
        lambda env, f=the_id: admin.create_checkpoint("db", env.store, CheckpointOptions(source=f(env))),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"clone from an {which} checkpoint",
        with_checkpoints,
        lambda env, f=the_id: admin.create_clone("c", "db", env.store, f(env)),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"tag an {which} checkpoint",
        with_checkpoints,
        lambda env, f=the_id: admin.create_tag("db", env.store, "t1", checkpoint=f(env)),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"suggest_split_keys at an {which} checkpoint",
        with_checkpoints,
        lambda env, f=the_id: admin.suggest_split_keys("db", env.store, 2, checkpoint=f(env)),
        error,
        ref,
        fix,
    )
    case(
        group,
        f"CLI scan --checkpoint {which}",
        with_checkpoints,
        cli("--path", "db", "scan", "--checkpoint", ref),
        1,
        ref,
        fix,
    )
    case(
        group,
        f"CLI create-checkpoint -s {which}",
        with_checkpoints,
        cli("--path", "db", "create-checkpoint", "-s", ref),
        1,
        ref,
        fix,
    )
    case(
        group,
        f"CLI clone --checkpoint {which}",
        with_checkpoints,
        cli("--path", "c", "clone", "--parent", "db", "--checkpoint", ref),
        1,
        ref,
        fix,
    )
    case(
        group,
        f"CLI create-tag -s {which}",
        with_checkpoints,
        cli("--path", "db", "create-tag", "-n", "t1", "-s", ref),
        1,
        ref,
        fix,
    )
case(
    group,
    "refresh an unknown checkpoint",
    with_checkpoints,
    lambda env: admin.refresh_checkpoint("db", env.store, uuid.UUID(env.vars["unknown"]), None),
    CheckpointNotFoundError,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "delete an unknown checkpoint",
    with_checkpoints,
    lambda env: admin.delete_checkpoint("db", env.store, uuid.UUID(env.vars["unknown"]), dry_run=False),
    CheckpointNotFoundError,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "CLI refresh-checkpoint unknown",
    with_checkpoints,
    cli("--path", "db", "refresh-checkpoint", "-i", "{unknown}"),
    1,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "CLI delete-checkpoint unknown",
    with_checkpoints,
    cli("--path", "db", "delete-checkpoint", "-i", "{unknown}"),
    1,
    "{unknown}",
    UNKNOWN_FIX,
)
case(
    group,
    "DbReader with a checkpoint id given as text",
    with_checkpoints,
    lambda env: DbReader.open("db", env.store, env.vars["unknown"], QUIET_READER),  # type: ignore[arg-type]
    InvalidArgumentError,
    "{unknown}",
    "uuid.UUID(text)",
)
