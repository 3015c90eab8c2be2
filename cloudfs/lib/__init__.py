"""Helpers several packages share, each with one home here.

``jsonlines.py`` (the JSON-lines framing of the control, hints and scheduler
sockets, and their one client), ``http_server.py`` (the threaded HTTP server
under the cache worker and the S3 gateway), ``loop.py`` (a step run every few
seconds in a thread), ``serve.py`` (a server process's run until SIGTERM or
SIGINT).

The bottom of the import graph, above the leaves only: modules here import
the standard library and ``cloudfs/errors.py``, ``types.py``, ``tls.py``,
``tokens.py``, ``metrics.py``, ``sizes.py``, never another cloudfs package.
"""
