"""The soak under faults (``benchmarks/soak.py``): topology, workload, fault schedule,
memory sampling and the report, one module each."""
