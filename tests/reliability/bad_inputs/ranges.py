"""Group 3, ranges: a start after the end, conflicting CLI bounds, a scan outside a shard."""

from __future__ import annotations

from slate_ops.errors import InvalidArgumentError, OutOfRangeError
from tests.reliability.bad_inputs.actions import db, reader
from tests.reliability.bad_inputs.catalogue import case, cli
from tests.reliability.bad_inputs.states import build, shard_db, with_open_db, with_open_reader

group = "ranges"
SWAP = "swap them"
case(
    group,
    "Db.scan start > end",
    with_open_db,
    lambda env: list(db(env).scan(b"k07", b"k02")),
    InvalidArgumentError,
    "scan start k07 is after its end k02",  # keys as the CLI prints them (text, or hex:)
    SWAP,
)
case(
    group,
    "DbReader.scan start > end",
    with_open_reader,
    lambda env: list(reader(env).scan(b"z", b"a")),
    InvalidArgumentError,
    "scan start z is after its end a",
    SWAP,
)
case(
    group,
    "CLI scan --from after --to",
    build,
    cli("--path", "db", "scan", "--from", "k07", "--to", "k02"),
    2,
    "k07",
    SWAP,
)
case(
    group,
    "CLI scan --prefix with --from",
    build,
    cli("--path", "db", "scan", "--prefix", "k", "--from", "k1"),
    2,
    "cannot be combined",
)
# Defined behaviour, not errors: [k, k) is empty; a scan entirely outside a shard is refused.
case(
    group, "Db.scan start == end is empty", with_open_db, lambda env: list(db(env).scan(b"k03", b"k03")), None
)
case(
    group,
    "scan entirely outside the shard",
    shard_db,
    lambda env: list(db(env).scan(b"k06", b"k09")),
    OutOfRangeError,
    "{location}",
    "scan the shard",
)
