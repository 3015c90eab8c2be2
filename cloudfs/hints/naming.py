"""How a job is named when it does not say."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def default_job_name() -> str:
    """``$CLOUDFS_JOB``, else the program's name and pid."""
    return os.environ.get("CLOUDFS_JOB") or f"{Path(sys.argv[0]).stem or 'python'}-{os.getpid()}"
