"""The engines the tree-operation tests here run over: memory, and a real etcd."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cloudfs.meta.engine.kv import KVEngine
from cloudfs.meta.engine.kv_memory import MemoryKV
from testkit.etcd import EtcdCluster


@pytest.fixture(params=["memory", "etcd"])
def engine(request: pytest.FixtureRequest) -> Iterator[KVEngine]:
    if request.param == "memory":
        yield MemoryKV()
        return
    from cloudfs.meta.engine.kv_etcd import EtcdKV

    etcd: EtcdCluster = request.getfixturevalue("etcd")
    kv = EtcdKV(etcd.endpoints, request.getfixturevalue("etcd_prefix"))
    yield kv
    kv.close()
