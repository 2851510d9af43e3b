"""The parts of the seeded simulation (tests/reliability/simulation.py is its entry point):
``runtime`` (configuration, deterministic runtime, stores, models), ``context`` (the shared world
every actor receives), ``scheduler`` (steps, stalls, the final phase), ``actors/`` (one actor a
file), ``family`` (the lifecycle family's model), ``pins`` and ``checks`` (main's invariants),
``invariants`` (the family-wide invariants); ``adversary`` and ``interleave`` (the adversarial
simulation)."""
