"""What hostile input looks like: shared hypothesis settings and value strategies.

Every fuzz test runs a bounded, repeatable number of examples (``FUZZ``):
``derandomize`` and no example database, so CI sees the same inputs on every
run, and no per-example deadline (a real server answers in its own time).
``CLOUDFS_FUZZ_EXAMPLES`` runs more of them, for a longer hunt by hand.
"""

from __future__ import annotations

import os
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=int(os.environ.get("CLOUDFS_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
UINT32 = (0, 2**32 - 1)
INT32 = (-(2**31), 2**31 - 1)


def edge_ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Integers in [lo, hi], weighted to the edges and the small values a tree uses."""
    edges = sorted(v for v in {lo, lo + 1, hi - 1, hi, 0, 1, 2, 3} if lo <= v <= hi)
    return st.one_of(
        st.sampled_from(edges), st.integers(lo, hi), st.integers(max(lo, 0), min(hi, 64))
    )


# Names as hostile clients send them: empty, NUL, '/', '.', '..', long, not UTF-8.
NAMES: st.SearchStrategy[bytes] = st.one_of(
    st.sampled_from(
        [b"", b".", b"..", b"/", b"a/b", b"a\x00b", b"\x00", b"\xff\xfe", b"a" * 256, b"x" * 10_240]
    ),
    st.binary(max_size=40),
    st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass")),
)

TEXT: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(["", ".", "..", "/", "a\x00b", "x" * 10_240, "\u202e", "vol/../x"]),
    st.text(max_size=30),
)


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = field.type
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return edge_ints(*UINT64)
    if t in (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
    ):
        return edge_ints(*INT64)
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return edge_ints(*UINT32)
    if t in (
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SFIXED32,
    ):
        return edge_ints(*INT32)
    if t == FieldDescriptor.TYPE_ENUM:
        return edge_ints(*INT32)  # unknown values included: open enums keep them
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32 if t == 2 else 64)
    if t == FieldDescriptor.TYPE_BYTES:
        return NAMES
    if t == FieldDescriptor.TYPE_STRING:
        return TEXT
    raise AssertionError(f"no strategy for field {field.full_name}")


def messages(
    descriptor: Descriptor,
    overrides: dict[str, st.SearchStrategy[Any]] | None = None,
    depth: int = 0,
    required: frozenset[str] = frozenset(),
) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments for the message ``descriptor``: each field set or left out
    (``required`` ones always set), with values at and past their edges;
    ``overrides`` give some fields' values."""
    overrides = overrides or {}
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.name in overrides:
            fields[field.name] = overrides[field.name]
            continue
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:  # a map<scalar, scalar>
            key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
            if value.type != FieldDescriptor.TYPE_MESSAGE:
                fields[field.name] = st.dictionaries(_scalar(key), _scalar(value), max_size=3)
            continue
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth > 2:
                continue
            fields[field.name] = messages(field.message_type, None, depth + 1).map(
                lambda kw, f=field: f.message_type._concrete_class(**kw)
            )
        else:
            fields[field.name] = _scalar(field)
        if field.is_repeated:
            fields[field.name] = st.lists(fields[field.name], max_size=4)
    always = {name: fields.pop(name) for name in required if name in fields}
    return st.fixed_dictionaries(always, optional=fields)
