"""The ``cloudfs`` command's subcommands (``main`` dispatches to them).

gRPC's C core writes its own errors to stderr: a refused TLS handshake is three
lines per try, dozens before the call gives up. Each command already says in one
line of its own what failed and why (the handshake's reason included), so the
core's lines are off unless ``GRPC_VERBOSITY`` is set (ERROR, INFO or DEBUG turn
them back on). Set here, before any subcommand imports grpc.
"""

import os

os.environ.setdefault("GRPC_VERBOSITY", "NONE")
