#!/usr/bin/env bash
# Install what the peer benchmark needs (as root, on Debian), then run it:
#   bash benchmarks/peers.sh [--repeats 3] [--quick] ...   (arguments go to peers.py)
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
missing=()
for tool in s3fs rclone fio fusermount3; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  pkgs=("${missing[@]/fusermount3/fuse3}")
  apt-get update -qq
  apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
python3 -c "import cloudfs, moto" 2>/dev/null || bash .ci/setup
# torch from the local wheel, pinned: never a plain `torch`
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q torch==2.13.0
exec python3 benchmarks/peers.py "$@"
