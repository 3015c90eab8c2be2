"""The embedded job scheduler: ``cloudfs job submit``, ``cloudfs scheduler serve``.

One machine, one scheduler process (started on demand), its state in LMDB.
``spec`` parses job files, ``config`` the groups and quotas, ``policy`` decides
which queued jobs start (pure), ``store`` keeps jobs and events, ``readiness``
mounts and warms a job's volumes, ``runner`` starts and stops its workers,
``scheduler`` is the loop that ties them together and ``server`` its socket.
See docs/jobs.md.
"""
