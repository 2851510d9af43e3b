"""slate_ops's benchmarks: ``python -m benchmarks`` runs them all and writes docs/benchmarks.md.

Each ``bench_*`` module also runs alone (``python -m benchmarks.bench_engine``, ...), from the
repository root. ``run_all`` is the command, ``suite`` the registry of the benchmarks and of their
summary rows, ``reporting`` what they share at their end: the Markdown table renderer, the command
line with ``--output`` and ``--quick``, and ``publish`` (print the report, write the results file).
"""
