#!/usr/bin/env bash
# Install what the write benchmark needs (as root, on Debian), then run it:
#   bash benchmarks/writes.sh [--repeats 3] [--quick] [--systems ...]   (arguments go to writes.py)
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
missing=()
for tool in s3fs rclone fusermount3; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  pkgs=("${missing[@]/fusermount3/fuse3}")
  apt-get update -qq
  apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
python3 -c "import cloudfs, moto" 2>/dev/null || bash .ci/setup
exec python3 benchmarks/writes.py "$@"
