"""The log set-up of the long-running servers (``meta serve``, ``cache serve``,
``gateway s3``, the scheduler's extender and admission check): one line per
record on stderr, INFO unless ``--debug``."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(debug: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format=FORMAT)
