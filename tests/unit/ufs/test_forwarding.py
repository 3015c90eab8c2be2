"""ForwardingObjectStore forwards every ObjectStore method, so no wrapper can miss one."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from cloudfs.ufs.faults import FaultyObjectStore
from cloudfs.ufs.forwarding import OPS, ForwardingObjectStore
from cloudfs.ufs.interface import ObjectStore
from cloudfs.ufs.metered import LABELS

T = TypeVar("T")

PROTOCOL = sorted(name for name in vars(ObjectStore) if not name.startswith("_"))
METHODS = [name for name in PROTOCOL if callable(getattr(ObjectStore, name))]


class _Recorder:
    """An inner store that records each call and answers with a marker of it."""

    uri = "recorder://"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        signature = inspect.signature(getattr(ObjectStore, name))

        def method(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(None, *args, **kwargs)
            bound.apply_defaults()
            arguments = {k: v for k, v in bound.arguments.items() if k != "self"}
            self.calls.append((name, arguments))
            return ("result of", name)

        return method


class _Hooked(ForwardingObjectStore):
    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.ops: list[str] = []

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        self.ops.append(op)
        return fn()


def _arguments(name: str) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """A distinct value for every parameter of method ``name``: (args, kwargs, all by name)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    every: dict[str, Any] = {}
    for param in list(inspect.signature(getattr(ObjectStore, name)).parameters.values())[1:]:
        every[param.name] = value = f"<{name}.{param.name}>"
        if param.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    return args, kwargs, every


def test_every_protocol_member_is_defined_by_the_base() -> None:
    assert PROTOCOL, "ObjectStore has no members?"
    missing = [name for name in PROTOCOL if name not in vars(ForwardingObjectStore)]
    assert not missing, f"ForwardingObjectStore does not forward {missing}"


def test_ops_are_the_methods_that_make_a_request() -> None:
    assert set(METHODS) - {"validate_key"} == OPS
    assert set(LABELS) == OPS - {"statfs"}  # every request but statfs is metered


@pytest.mark.parametrize("name", METHODS)
def test_each_method_reaches_the_inner_store_with_its_arguments(name: str) -> None:
    inner = _Recorder()
    store = _Hooked(inner)
    args, kwargs, expected = _arguments(name)
    returns = inspect.signature(getattr(ObjectStore, name)).return_annotation
    result = getattr(store, name)(*args, **kwargs)
    assert result == (None if returns == "None" else ("result of", name))
    assert inner.calls == [(name, expected)]
    assert store.ops == ([name] if name in OPS else [])


def test_uri_is_the_inner_stores() -> None:
    assert ForwardingObjectStore(_Recorder()).uri == "recorder://"  # type: ignore[arg-type]


def test_faulty_store_changes_only_the_hook() -> None:
    """It injects faults around every request: no protocol method of its own."""
    assert not set(PROTOCOL) & set(vars(FaultyObjectStore))
