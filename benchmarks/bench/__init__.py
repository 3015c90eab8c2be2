"""The peer benchmark of issue 4: CloudFS vs s3fs-fuse, rclone mount, local disk and the origin.

``benchmarks/peers.py`` drives it; the modules here are its parts:

- ``dataset``: the data set, written once to the bucket and to a local-disk directory;
- ``systems``: mounting and unmounting each system under test, bounded in time;
- ``workloads``: the measured passes, each run in a child process with a time limit;
- ``suite``: the sequence of passes for one system, and the origin's ceiling;
- ``eviction``: CloudFS with a cache half the size of the data set, per cache policy;
- ``report``: medians, ratios and target verdicts into ``benchmarks/RESULTS.md``.

``benchmarks/writes.py`` (issue 5, writes through a latency proxy) uses ``systems``,
``host`` and ``workloads.run_pass`` too, with its own ``writesuite``, ``writeload``,
``objects`` (checking the bucket) and ``writereport`` (``benchmarks/RESULTS-writes.md``).
"""
