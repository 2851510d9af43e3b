"""The simulation's actors: each takes one step at a time on the shared
:class:`~tests.reliability.sim.context.SimContext`."""
