"""``python3 -m tests.gateway.launch gateway s3 ...``: ``cloudfs`` itself, with TEMPORARY
stand-ins (``standin/``) for ``cloudfs.gateway.sigv4``/``payload`` while those modules
are not in the tree yet; once they are, this is exactly ``python3 -m cloudfs.cli.main``."""

from __future__ import annotations

import importlib
import sys

for name in ("sigv4", "payload"):
    try:
        importlib.import_module(f"cloudfs.gateway.{name}")
    except ModuleNotFoundError:
        module = importlib.import_module(f"tests.gateway.standin.{name}")
        sys.modules[f"cloudfs.gateway.{name}"] = module
        setattr(importlib.import_module("cloudfs.gateway"), name, module)

from cloudfs.cli.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
