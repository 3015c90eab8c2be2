"""fsspec's own abstract test suite (copy, get, put, open, pipe) run against ``cloudfs://``.

The same expectations every fsspec implementation is held to, over a real
tree service and a volume on a local directory.
"""

from __future__ import annotations

import posixpath
import shutil
from collections.abc import Callable, Iterator

import pytest
from fsspec.tests.abstract import AbstractFixtures
from fsspec.tests.abstract.copy import AbstractCopyTests
from fsspec.tests.abstract.get import AbstractGetTests
from fsspec.tests.abstract.open import AbstractOpenTests
from fsspec.tests.abstract.pipe import AbstractPipeTests
from fsspec.tests.abstract.put import AbstractPutTests

from cloudfs.fsspec import CloudFileSystem
from testkit.tree_server import TreeServer
from tests.fsspec.conftest import Volume, new_local_volume


@pytest.fixture(scope="module")
def suite_volume(tree: TreeServer) -> Iterator[Volume]:
    vol = new_local_volume(tree)
    yield vol
    assert vol.local_dir is not None
    shutil.rmtree(vol.local_dir, ignore_errors=True)


class CloudFixtures(AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture
    def fs(self, tree: TreeServer) -> Iterator[CloudFileSystem]:
        fs = CloudFileSystem(meta_server=tree.address, skip_instance_cache=True)
        yield fs
        fs.close()

    @pytest.fixture
    def fs_join(self) -> Callable[..., str]:
        return posixpath.join

    @pytest.fixture
    def fs_path(self, suite_volume: Volume) -> str:
        return suite_volume.name


class TestCloudfsCopy(AbstractCopyTests, CloudFixtures):  # type: ignore[misc]
    pass


class TestCloudfsGet(AbstractGetTests, CloudFixtures):  # type: ignore[misc]
    pass


class TestCloudfsPut(AbstractPutTests, CloudFixtures):  # type: ignore[misc]
    pass


class TestCloudfsOpen(AbstractOpenTests, CloudFixtures):  # type: ignore[misc]
    pass


class TestCloudfsPipe(AbstractPipeTests, CloudFixtures):  # type: ignore[misc]
    pass
