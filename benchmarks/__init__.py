"""slate_ops's benchmarks: ``python -m benchmarks`` runs them all and writes docs/benchmarks.md.

Each ``bench_*`` module also runs alone (``python -m benchmarks.bench_engine``, ...), from the
repository root. ``run_all`` is the command, ``suite`` the registry of the benchmarks and of their
summary rows.
"""
