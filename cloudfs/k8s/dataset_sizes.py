"""How big each of a Workload's CloudFS volumes is: the denominator of "ready".

The tree service knows which volumes exist (``GetVolume``) but not how many
bytes a volume's dataset holds (its ``StatFs`` is the object store's, and a
walk of a million-file dataset per reconcile is too dear). So the size is
declared, per volume: the Workload annotation ``cloudfs.io/dataset-bytes:
imagenet=140Gi,coco=20GiB`` (Kueue copies the job's annotations onto its
Workload), else the controller's ``--dataset-bytes VOLUME=SIZE``. Without
one the check answers Retry with a message that says so.
"""

from __future__ import annotations

from typing import Any

from cloudfs.errors import UsageError
from cloudfs.sizes import parse_quantity

DATASET_BYTES_ANNOTATION = "cloudfs.io/dataset-bytes"


def parse_sizes(text: str) -> dict[str, int]:
    """``vol=140Gi,vol2=20GiB`` -> volume -> bytes (Kubernetes ``Gi`` suffixes too)."""
    out: dict[str, int] = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        volume, sep, size = item.partition("=")
        if not sep or not volume.strip():
            raise UsageError(f"invalid dataset size {item!r} (VOLUME=SIZE)")
        out[volume.strip()] = parse_quantity(size)
    return out


def dataset_bytes(
    workload: dict[str, Any], volumes: list[str], defaults: dict[str, int]
) -> dict[str, int | None]:
    """volume -> declared bytes (None: unknown), the annotation first."""
    raw = ((workload.get("metadata") or {}).get("annotations") or {}).get(
        DATASET_BYTES_ANNOTATION, ""
    )
    try:
        declared = {**defaults, **parse_sizes(raw)}
    except UsageError:
        declared = dict(defaults)
    return {v: declared.get(v) for v in volumes}
