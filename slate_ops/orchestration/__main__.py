"""``python -m slate_ops.orchestration <command>``: the orchestration's two commands.

- ``partitions``: make the instance's database partitions equal to a fleet now
  (:func:`slate_ops.orchestration.partitions.main`);
- ``summary``: the latest ``maintenance_job`` run of databases, one summary each
  (:func:`slate_ops.orchestration.summary.main`).

(One entry point for both: ``python -m slate_ops.orchestration.partitions`` would run a module the
package has already imported, which Python warns about.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from slate_ops.orchestration import partitions, summary

COMMANDS: dict[str, Callable[[list[str]], int]] = {"partitions": partitions.main, "summary": summary.main}
PROG = "python -m slate_ops.orchestration"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        given = f"unknown command {args[0]!r}; " if args and not args[0].startswith("-") else ""
        choices = ", ".join(COMMANDS)
        print(f"usage: {PROG} {{{choices}}} ...\n{PROG}: {given}choose one of: {choices}", file=sys.stderr)
        return 2
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
