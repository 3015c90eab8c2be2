"""A discrete-event simulation of cache-aware vs cache-blind job placement.

Simulated, not a cluster: nodes, their block caches, the origin link and the
jobs' reads are a model driven by rates measured elsewhere in benchmarks/.
`benchmarks/scheduling_sim.py` is the command line; RESULTS-scheduling.md the
figures and the model's assumptions.
"""
