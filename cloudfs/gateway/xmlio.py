"""S3's XML documents: rendering the answers, parsing the requests' bodies safely.

Answers are built with ``xml.etree.ElementTree`` in S3's namespace (clients
parse them by tag; pyarrow's and s3a's parsers want the namespace). Request
bodies (DeleteObjects, CompleteMultipartUpload) are parsed only after a size
limit, and a document with a DOCTYPE is refused outright: no entity is ever
expanded, internal or external.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cloudfs.gateway.errors import S3Error

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_XML_BODY = 4 * 1024 * 1024  # 1000 keys of 1024 bytes, or 10000 parts, fit

# (tag, value): text, a number, a bool, None (left out) or a subtree of the same shape.
Tree = list[tuple[str, Any]]


def render(root: str, children: Tree) -> bytes:
    """``<root xmlns=S3>`` with ``children``: (tag, text | int | bool | subtree) pairs,
    where a subtree is itself a list of pairs; ``None`` values are left out."""
    element = ET.Element(root, xmlns=NS)
    _fill(element, children)
    document: bytes = ET.tostring(element, encoding="utf-8", xml_declaration=False)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + document


def _fill(parent: ET.Element, children: Tree) -> None:
    for tag, value in children:
        if value is None:
            continue
        child = ET.SubElement(parent, tag)
        if isinstance(value, list):
            _fill(child, value)
        elif isinstance(value, bool):
            child.text = "true" if value else "false"
        else:
            child.text = str(value)


def parse(body: bytes, root: str) -> ET.Element:
    """The document's root element, which must be ``root`` (any namespace, or none);
    ``MalformedXML`` (400) for anything else."""
    if len(body) > MAX_XML_BODY:
        raise S3Error("MalformedXML", 400, "the XML document is too large")
    if b"<!DOCTYPE" in body.upper() or b"<!ENTITY" in body.upper():
        raise S3Error("MalformedXML", 400, "DOCTYPE and entities are not accepted")
    try:
        element = ET.fromstring(body)
    except ET.ParseError as e:
        raise S3Error(
            "MalformedXML",
            400,
            f"The XML you provided was not well-formed or did not validate: {e}",
        ) from None
    if local(element.tag) != root:
        raise S3Error("MalformedXML", 400, f"expected a <{root}> document")
    return element


def local(tag: str) -> str:
    """A tag without its ``{namespace}``."""
    return tag.rsplit("}", 1)[-1]


def children(element: ET.Element, tag: str) -> list[ET.Element]:
    return [c for c in element if local(c.tag) == tag]


def text(element: ET.Element, tag: str) -> str | None:
    found = children(element, tag)
    return None if not found else found[0].text or ""


@dataclass(frozen=True, slots=True)
class PartRef:
    number: int
    etag: str  # unquoted


def parse_complete(body: bytes) -> list[PartRef]:
    """CompleteMultipartUpload's parts, in the order given (checked by the caller)."""
    root = parse(body, "CompleteMultipartUpload")
    parts: list[PartRef] = []
    for part in children(root, "Part"):
        number, etag = text(part, "PartNumber"), text(part, "ETag")
        if (
            number is None
            or etag is None
            or not (number.strip().isascii() and number.strip().isdigit())
        ):
            raise S3Error("MalformedXML", 400, "each <Part> needs a <PartNumber> and an <ETag>")
        parts.append(PartRef(int(number), etag.strip().strip('"')))
    if not parts:
        raise S3Error("MalformedXML", 400, "the upload names no parts")
    return parts


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    keys: list[str]
    quiet: bool


def parse_delete(body: bytes) -> DeleteRequest:
    root = parse(body, "Delete")
    quiet = (text(root, "Quiet") or "").strip().lower() == "true"
    keys: list[str] = []
    for obj in children(root, "Object"):
        key = text(obj, "Key")
        if key is None:
            raise S3Error("MalformedXML", 400, "each <Object> needs a <Key>")
        keys.append(key)
    if not keys or len(keys) > 1000:
        raise S3Error("MalformedXML", 400, "DeleteObjects takes 1 to 1000 keys")
    return DeleteRequest(keys, quiet)


def rows(tag: str, items: Iterable[Tree]) -> Tree:
    """Repeated ``<tag>`` elements (``Contents``, ``CommonPrefixes``...)."""
    return [(tag, list(item)) for item in items]
