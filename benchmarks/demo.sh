#!/usr/bin/env bash
# Set up a fresh Debian machine (system packages, Python install) and run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup
exec python3 benchmarks/demo.py "$@"
