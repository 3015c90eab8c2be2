from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BlockSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BLOCK_SOURCE_UNSPECIFIED: _ClassVar[BlockSource]
    BLOCK_SOURCE_MEMORY: _ClassVar[BlockSource]
    BLOCK_SOURCE_DISK: _ClassVar[BlockSource]
    BLOCK_SOURCE_ORIGIN: _ClassVar[BlockSource]
BLOCK_SOURCE_UNSPECIFIED: BlockSource
BLOCK_SOURCE_MEMORY: BlockSource
BLOCK_SOURCE_DISK: BlockSource
BLOCK_SOURCE_ORIGIN: BlockSource

class GetBlockRequest(_message.Message):
    __slots__ = ("store_uri", "key", "etag", "object_size", "block_size", "index", "fill_only")
    STORE_URI_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    OBJECT_SIZE_FIELD_NUMBER: _ClassVar[int]
    BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    FILL_ONLY_FIELD_NUMBER: _ClassVar[int]
    store_uri: str
    key: str
    etag: str
    object_size: int
    block_size: int
    index: int
    fill_only: bool
    def __init__(self, store_uri: _Optional[str] = ..., key: _Optional[str] = ..., etag: _Optional[str] = ..., object_size: _Optional[int] = ..., block_size: _Optional[int] = ..., index: _Optional[int] = ..., fill_only: _Optional[bool] = ...) -> None: ...

class GetBlockReply(_message.Message):
    __slots__ = ("data", "source", "crc32")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    source: BlockSource
    crc32: int
    def __init__(self, data: _Optional[bytes] = ..., source: _Optional[_Union[BlockSource, str]] = ..., crc32: _Optional[int] = ...) -> None: ...
