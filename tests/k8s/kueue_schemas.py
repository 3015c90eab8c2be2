"""Validate objects of Kueue's kinds against its CRD schemas (``kueue-crds/``)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

CRDS = Path(__file__).parent / "kueue-crds"


@cache
def schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema."""
    out = {}
    for path in CRDS.glob("*.json"):
        crd = json.loads(path.read_text())
        out[(f"{crd['group']}/{crd['version']}", crd["kind"])] = crd["openAPIV3Schema"]
    return out


def validate(obj: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``obj`` fits its kind's schema."""
    schema = schemas()[(obj["apiVersion"], obj["kind"])]
    jsonschema.Draft7Validator(schema).validate(obj)
