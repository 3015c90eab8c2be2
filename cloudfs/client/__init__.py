"""A volume of the tree service reached from a process, without FUSE.

What ``cloudfs://`` (``cloudfs.fsspec``) and the S3 gateway (``cloudfs.gateway``)
share: ``ClientOptions`` (the tree service, its token, cache sizes),
``VolumeHandle`` (names from the tree, bytes through ``BlockFetcher`` with the
mount's block keys, writes committed as the mount's write-through commits
them).
"""
