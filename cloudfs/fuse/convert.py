"""Conversions between CloudFS values and pyfuse3's structures."""

from __future__ import annotations

import pyfuse3

from cloudfs.types import Attr, AttrChanges, FsStats

STAT_BLOCK = 512


def entry_attributes(attr: Attr, timeout: float, block_size: int) -> pyfuse3.EntryAttributes:
    entry = pyfuse3.EntryAttributes()
    entry.st_ino = pyfuse3.InodeT(attr.inode)
    entry.generation = 0
    entry.entry_timeout = timeout
    entry.attr_timeout = timeout
    entry.st_mode = pyfuse3.ModeT(attr.mode)
    entry.st_nlink = attr.nlink
    entry.st_uid = attr.uid
    entry.st_gid = attr.gid
    entry.st_rdev = attr.rdev
    entry.st_size = attr.size
    entry.st_blksize = block_size
    entry.st_blocks = (attr.size + STAT_BLOCK - 1) // STAT_BLOCK
    entry.st_atime_ns = attr.atime_ns
    entry.st_mtime_ns = attr.mtime_ns
    entry.st_ctime_ns = attr.ctime_ns
    return entry


def attr_changes(attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields) -> AttrChanges:
    return AttrChanges(
        mode=(attr.st_mode & 0o7777) if fields.update_mode else None,
        uid=attr.st_uid if fields.update_uid else None,
        gid=attr.st_gid if fields.update_gid else None,
        size=attr.st_size if fields.update_size else None,
        atime_ns=attr.st_atime_ns if fields.update_atime else None,
        mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
        ctime_ns=attr.st_ctime_ns if fields.update_ctime else None,
    )


def statvfs(stats: FsStats) -> pyfuse3.StatvfsData:
    data = pyfuse3.StatvfsData()
    data.f_bsize = stats.block_size
    data.f_frsize = stats.block_size
    data.f_blocks = stats.total_blocks
    data.f_bfree = stats.free_blocks
    data.f_bavail = stats.free_blocks
    data.f_files = stats.total_inodes
    data.f_ffree = stats.free_inodes
    data.f_favail = stats.free_inodes
    data.f_namemax = stats.name_max
    return data
