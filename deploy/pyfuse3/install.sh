#!/usr/bin/env bash
# Build and install pyfuse3 with CloudFS's patches (dataset-mode.patch, receive-loop.patch,
# reply-without-gil.patch, then noflush.patch; README.md here says why).
# Idempotent: does nothing when the patched build is already installed.
# WHEEL_DIR=DIR: build the patched wheel into DIR instead of installing it.
# Needs: libfuse3-dev, pkg-config, gcc, python3-dev, and PyPI (the sdist, Cython).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version=3.5.0  # the release the patches are made against
python=${PYTHON:-python3}
if [ -z "${WHEEL_DIR:-}" ] && "$python" -c 'import pyfuse3, sys; sys.exit(0 if getattr(pyfuse3, "OPEN_HONOURS_NOFLUSH", False) else 1)' 2>/dev/null; then
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The sdist (--no-binary pyfuse3; ":all:" would build its build dependencies, Cython, from
# source as well: 3 min on 2 cores).
"$python" -m pip download -q --disable-pip-version-check --no-deps --no-binary pyfuse3 \
  "pyfuse3==$version" -d "$work" 2>&1 | grep -v -E "Location 'file:///.*is ignored" || true
tar xzf "$work/pyfuse3-$version.tar.gz" -C "$work"
src="$work/pyfuse3-$version"
patch -s -p1 -d "$src" < "$here/dataset-mode.patch"
patch -s -p1 -d "$src" < "$here/receive-loop.patch"
patch -s -p1 -d "$src" < "$here/reply-without-gil.patch"
patch -s -p1 -d "$src" < "$here/noflush.patch"
rm -f "$src/src/pyfuse3/__init__.c"  # shipped pre-generated: Cython must regenerate it
# The local version label says in `pip show pyfuse3` which build this is.
export SETUPTOOLS_SCM_PRETEND_VERSION="$version+cloudfs.dataset5"
if [ -n "${WHEEL_DIR:-}" ]; then  # an image build: a wheel to install elsewhere
  "$python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$WHEEL_DIR" "$src"
  exit 0
fi
# Its one dependency, trio, comes along when missing; a stock pyfuse3 is replaced (the local
# version label differs).
"$python" -m pip install -q --disable-pip-version-check "$src" 2>&1 \
  | grep -v -E "Running pip as the 'root' user|Location 'file:///.*is ignored" || true
"$python" -c 'import pyfuse3, sys; sys.exit(0 if pyfuse3.OPEN_HONOURS_NOFLUSH else 1)'
