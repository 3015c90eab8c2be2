#!/usr/bin/env bash
# The README's first command: installs what the mount and the demo need on a fresh Debian machine
# (.ci/setup-mount: FUSE 3, the patched pyfuse3, the package, moto; not the tests' tools), then
# runs the demo. PYTHON=/path/to/python uses that interpreter (a venv's, say); python3 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup-mount
exec "${PYTHON:-python3}" benchmarks/demo.py "$@"
