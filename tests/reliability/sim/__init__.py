"""The parts of the seeded simulation (tests/reliability/simulation.py): ``runtime`` (configuration,
deterministic runtime, stores, models), ``lifecycle`` (the lifecycle actor), ``invariants`` (the
family-wide invariants)."""
