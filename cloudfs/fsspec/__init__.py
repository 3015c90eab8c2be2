"""``cloudfs://VOLUME/path``: volumes of the directory-tree service through fsspec.

Registered as fsspec's ``cloudfs`` protocol (the ``fsspec.specs`` entry point in
pyproject.toml), so ``fsspec.open("cloudfs://imagenet/train/0001.jpg")``,
``pandas.read_parquet("cloudfs://...")`` and pyarrow's datasets work without a
mount. See ``filesystem.py``.
"""

from cloudfs.fsspec.filesystem import CloudFileSystem

__all__ = ["CloudFileSystem"]
