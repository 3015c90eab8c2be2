from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Attr(_message.Message):
    __slots__ = ("inode", "mode", "nlink", "uid", "gid", "size", "atime_ns", "mtime_ns", "ctime_ns", "rdev", "etag")
    INODE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NLINK_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ATIME_NS_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    CTIME_NS_FIELD_NUMBER: _ClassVar[int]
    RDEV_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    inode: int
    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    rdev: int
    etag: str
    def __init__(self, inode: _Optional[int] = ..., mode: _Optional[int] = ..., nlink: _Optional[int] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., size: _Optional[int] = ..., atime_ns: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., ctime_ns: _Optional[int] = ..., rdev: _Optional[int] = ..., etag: _Optional[str] = ...) -> None: ...

class AttrChanges(_message.Message):
    __slots__ = ("mode", "uid", "gid", "size", "atime_ns", "mtime_ns", "ctime_ns", "etag")
    MODE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ATIME_NS_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    CTIME_NS_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    mode: int
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    etag: str
    def __init__(self, mode: _Optional[int] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., size: _Optional[int] = ..., atime_ns: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., ctime_ns: _Optional[int] = ..., etag: _Optional[str] = ...) -> None: ...

class DirEntry(_message.Message):
    __slots__ = ("name", "attr")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTR_FIELD_NUMBER: _ClassVar[int]
    name: bytes
    attr: Attr
    def __init__(self, name: _Optional[bytes] = ..., attr: _Optional[_Union[Attr, _Mapping]] = ...) -> None: ...

class FsStats(_message.Message):
    __slots__ = ("block_size", "total_blocks", "free_blocks", "total_inodes", "free_inodes", "name_max")
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    FREE_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_INODES_FIELD_NUMBER: _ClassVar[int]
    FREE_INODES_FIELD_NUMBER: _ClassVar[int]
    NAME_MAX_FIELD_NUMBER: _ClassVar[int]
    block_size: int
    total_blocks: int
    free_blocks: int
    total_inodes: int
    free_inodes: int
    name_max: int
    def __init__(self, block_size: _Optional[int] = ..., total_blocks: _Optional[int] = ..., free_blocks: _Optional[int] = ..., total_inodes: _Optional[int] = ..., free_inodes: _Optional[int] = ..., name_max: _Optional[int] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VolumeRef(_message.Message):
    __slots__ = ("volume",)
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    volume: str
    def __init__(self, volume: _Optional[str] = ...) -> None: ...

class InodeRequest(_message.Message):
    __slots__ = ("volume", "inode")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inode: int
    def __init__(self, volume: _Optional[str] = ..., inode: _Optional[int] = ...) -> None: ...

class InodesRequest(_message.Message):
    __slots__ = ("volume", "inodes")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODES_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inodes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, volume: _Optional[str] = ..., inodes: _Optional[_Iterable[int]] = ...) -> None: ...

class NameRequest(_message.Message):
    __slots__ = ("volume", "parent", "name")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    volume: str
    parent: int
    name: bytes
    def __init__(self, volume: _Optional[str] = ..., parent: _Optional[int] = ..., name: _Optional[bytes] = ...) -> None: ...

class AttrReply(_message.Message):
    __slots__ = ("attr",)
    ATTR_FIELD_NUMBER: _ClassVar[int]
    attr: Attr
    def __init__(self, attr: _Optional[_Union[Attr, _Mapping]] = ...) -> None: ...

class CreatedReply(_message.Message):
    __slots__ = ("attr", "key", "parent")
    ATTR_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    attr: Attr
    key: bytes
    parent: Attr
    def __init__(self, attr: _Optional[_Union[Attr, _Mapping]] = ..., key: _Optional[bytes] = ..., parent: _Optional[_Union[Attr, _Mapping]] = ...) -> None: ...

class SetAttrRequest(_message.Message):
    __slots__ = ("volume", "inode", "changes")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inode: int
    changes: AttrChanges
    def __init__(self, volume: _Optional[str] = ..., inode: _Optional[int] = ..., changes: _Optional[_Union[AttrChanges, _Mapping]] = ...) -> None: ...

class ReadDirRequest(_message.Message):
    __slots__ = ("volume", "inode", "after", "limit")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inode: int
    after: bytes
    limit: int
    def __init__(self, volume: _Optional[str] = ..., inode: _Optional[int] = ..., after: _Optional[bytes] = ..., limit: _Optional[int] = ...) -> None: ...

class ReadDirReply(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DirEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[DirEntry, _Mapping]]] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("volume", "parent", "name", "mode", "uid", "gid", "rdev", "inode")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    RDEV_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    volume: str
    parent: int
    name: bytes
    mode: int
    uid: int
    gid: int
    rdev: int
    inode: int
    def __init__(self, volume: _Optional[str] = ..., parent: _Optional[int] = ..., name: _Optional[bytes] = ..., mode: _Optional[int] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., rdev: _Optional[int] = ..., inode: _Optional[int] = ...) -> None: ...

class ReserveInodesRequest(_message.Message):
    __slots__ = ("volume", "count")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    volume: str
    count: int
    def __init__(self, volume: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class ReserveInodesReply(_message.Message):
    __slots__ = ("first",)
    FIRST_FIELD_NUMBER: _ClassVar[int]
    first: int
    def __init__(self, first: _Optional[int] = ...) -> None: ...

class SymlinkRequest(_message.Message):
    __slots__ = ("volume", "parent", "name", "target", "uid", "gid")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    volume: str
    parent: int
    name: bytes
    target: bytes
    uid: int
    gid: int
    def __init__(self, volume: _Optional[str] = ..., parent: _Optional[int] = ..., name: _Optional[bytes] = ..., target: _Optional[bytes] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ...) -> None: ...

class LinkRequest(_message.Message):
    __slots__ = ("volume", "inode", "new_parent", "new_name")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    NEW_PARENT_FIELD_NUMBER: _ClassVar[int]
    NEW_NAME_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inode: int
    new_parent: int
    new_name: bytes
    def __init__(self, volume: _Optional[str] = ..., inode: _Optional[int] = ..., new_parent: _Optional[int] = ..., new_name: _Optional[bytes] = ...) -> None: ...

class RenameRequest(_message.Message):
    __slots__ = ("volume", "parent", "name", "new_parent", "new_name", "flags")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_PARENT_FIELD_NUMBER: _ClassVar[int]
    NEW_NAME_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    volume: str
    parent: int
    name: bytes
    new_parent: int
    new_name: bytes
    flags: int
    def __init__(self, volume: _Optional[str] = ..., parent: _Optional[int] = ..., name: _Optional[bytes] = ..., new_parent: _Optional[int] = ..., new_name: _Optional[bytes] = ..., flags: _Optional[int] = ...) -> None: ...

class XattrRequest(_message.Message):
    __slots__ = ("volume", "inode", "name", "value", "flags")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inode: int
    name: bytes
    value: bytes
    flags: int
    def __init__(self, volume: _Optional[str] = ..., inode: _Optional[int] = ..., name: _Optional[bytes] = ..., value: _Optional[bytes] = ..., flags: _Optional[int] = ...) -> None: ...

class BytesReply(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: bytes
    def __init__(self, value: _Optional[bytes] = ...) -> None: ...

class NamesReply(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, names: _Optional[_Iterable[bytes]] = ...) -> None: ...

class StringReply(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: str
    def __init__(self, value: _Optional[str] = ...) -> None: ...

class StatFsReply(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: FsStats
    def __init__(self, stats: _Optional[_Union[FsStats, _Mapping]] = ...) -> None: ...

class CommitUploadRequest(_message.Message):
    __slots__ = ("volume", "inode", "size", "mtime_ns", "etag", "key")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inode: int
    size: int
    mtime_ns: int
    etag: str
    key: bytes
    def __init__(self, volume: _Optional[str] = ..., inode: _Optional[int] = ..., size: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., etag: _Optional[str] = ..., key: _Optional[bytes] = ...) -> None: ...

class CommitPendingRequest(_message.Message):
    __slots__ = ("volume", "inode", "size", "mtime_ns")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    volume: str
    inode: int
    size: int
    mtime_ns: int
    def __init__(self, volume: _Optional[str] = ..., inode: _Optional[int] = ..., size: _Optional[int] = ..., mtime_ns: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("volume", "session")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    volume: str
    session: str
    def __init__(self, volume: _Optional[str] = ..., session: _Optional[str] = ...) -> None: ...

class EntryRef(_message.Message):
    __slots__ = ("parent", "name")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    parent: int
    name: bytes
    def __init__(self, parent: _Optional[int] = ..., name: _Optional[bytes] = ...) -> None: ...

class Invalidation(_message.Message):
    __slots__ = ("inodes", "entries", "lost")
    INODES_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    inodes: _containers.RepeatedScalarFieldContainer[int]
    entries: _containers.RepeatedCompositeFieldContainer[EntryRef]
    lost: bool
    def __init__(self, inodes: _Optional[_Iterable[int]] = ..., entries: _Optional[_Iterable[_Union[EntryRef, _Mapping]]] = ..., lost: _Optional[bool] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("expires_ns",)
    EXPIRES_NS_FIELD_NUMBER: _ClassVar[int]
    expires_ns: int
    def __init__(self, expires_ns: _Optional[int] = ...) -> None: ...

class Volume(_message.Message):
    __slots__ = ("name", "ufs_uri", "meta_ttl", "default_uid", "default_gid", "file_mode", "dir_mode", "created_ns")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UFS_URI_FIELD_NUMBER: _ClassVar[int]
    META_TTL_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_UID_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_GID_FIELD_NUMBER: _ClassVar[int]
    FILE_MODE_FIELD_NUMBER: _ClassVar[int]
    DIR_MODE_FIELD_NUMBER: _ClassVar[int]
    CREATED_NS_FIELD_NUMBER: _ClassVar[int]
    name: str
    ufs_uri: str
    meta_ttl: float
    default_uid: int
    default_gid: int
    file_mode: int
    dir_mode: int
    created_ns: int
    def __init__(self, name: _Optional[str] = ..., ufs_uri: _Optional[str] = ..., meta_ttl: _Optional[float] = ..., default_uid: _Optional[int] = ..., default_gid: _Optional[int] = ..., file_mode: _Optional[int] = ..., dir_mode: _Optional[int] = ..., created_ns: _Optional[int] = ...) -> None: ...

class VolumeList(_message.Message):
    __slots__ = ("volumes",)
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    volumes: _containers.RepeatedCompositeFieldContainer[Volume]
    def __init__(self, volumes: _Optional[_Iterable[_Union[Volume, _Mapping]]] = ...) -> None: ...

class GroupMemberRequest(_message.Message):
    __slots__ = ("group", "address", "ttl_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    address: str
    ttl_ms: int
    def __init__(self, group: _Optional[str] = ..., address: _Optional[str] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class JoinGroupReply(_message.Message):
    __slots__ = ("expires_ns",)
    EXPIRES_NS_FIELD_NUMBER: _ClassVar[int]
    expires_ns: int
    def __init__(self, expires_ns: _Optional[int] = ...) -> None: ...

class GroupRef(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class GroupMembers(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, members: _Optional[_Iterable[str]] = ...) -> None: ...

class CacheReport(_message.Message):
    __slots__ = ("node", "volume", "cached_bytes", "ttl_ms", "reporter")
    NODE_FIELD_NUMBER: _ClassVar[int]
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    CACHED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    REPORTER_FIELD_NUMBER: _ClassVar[int]
    node: str
    volume: str
    cached_bytes: int
    ttl_ms: int
    reporter: str
    def __init__(self, node: _Optional[str] = ..., volume: _Optional[str] = ..., cached_bytes: _Optional[int] = ..., ttl_ms: _Optional[int] = ..., reporter: _Optional[str] = ...) -> None: ...

class CacheReportReply(_message.Message):
    __slots__ = ("expires_ns",)
    EXPIRES_NS_FIELD_NUMBER: _ClassVar[int]
    expires_ns: int
    def __init__(self, expires_ns: _Optional[int] = ...) -> None: ...

class NodeCache(_message.Message):
    __slots__ = ("node", "cached_bytes")
    NODE_FIELD_NUMBER: _ClassVar[int]
    CACHED_BYTES_FIELD_NUMBER: _ClassVar[int]
    node: str
    cached_bytes: int
    def __init__(self, node: _Optional[str] = ..., cached_bytes: _Optional[int] = ...) -> None: ...

class NodeCaches(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeCache]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeCache, _Mapping]]] = ...) -> None: ...
