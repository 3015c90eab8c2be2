"""The MetaService's calls as one table: RPC -> request type, how to call the Meta
protocol (``EmbeddedMeta``), how to wrap the result. Each RPC is exactly one Meta
call; ``server.py`` builds a handler from each row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloudfs.errors import InvalidArgument
from cloudfs.meta.embedded import EmbeddedMeta
from cloudfs.meta.engine.ops_create import Added
from cloudfs.meta.wire import convert as cv
from cloudfs.meta.wire.constants import MAX_RELEASES
from cloudfs.types import InodeId
from cloudfs.v1 import meta_pb2 as pb

Call = Callable[[EmbeddedMeta, Any], Any]
SessionCall = Callable[[EmbeddedMeta, Any, str], Any]  # also given the caller's session


def _attr(result: Any) -> pb.AttrReply:
    return pb.AttrReply(attr=cv.attr_to_pb(result)) if result is not None else pb.AttrReply()


def _created(added: Added) -> pb.CreatedReply:
    return pb.CreatedReply(
        attr=cv.attr_to_pb(added.attr),
        key=added.key.encode("utf-8", "surrogateescape"),
        parent=cv.attr_to_pb(added.parent),
    )


def _empty(_: Any) -> pb.Empty:
    return pb.Empty()


def _release_many(meta: EmbeddedMeta, request: pb.InodesRequest, session: str) -> None:
    if len(request.inodes) > MAX_RELEASES:
        count = len(request.inodes)
        raise InvalidArgument(f"ReleaseMany of {count} inodes (at most {MAX_RELEASES})")
    meta.release_many([InodeId(i) for i in request.inodes], session)


# RPC name -> (request type, the Meta call, the reply built from its result)
META_CALLS: dict[str, tuple[Any, Call, Callable[[Any], Any]]] = {
    "Lookup": (pb.NameRequest, lambda m, r: m.lookup(InodeId(r.parent), r.name), _attr),
    "LookupIfListed": (
        pb.NameRequest, lambda m, r: m.lookup_if_listed(InodeId(r.parent), r.name), _attr,
    ),
    "GetAttr": (pb.InodeRequest, lambda m, r: m.getattr(InodeId(r.inode)), _attr),
    "SetAttr": (
        pb.SetAttrRequest,
        lambda m, r: m.setattr(InodeId(r.inode), cv.changes_from_pb(r.changes)),
        _attr,
    ),
    "ReadDir": (
        pb.ReadDirRequest,
        lambda m, r: m.readdir(
            InodeId(r.inode), r.after if r.HasField("after") else None, r.limit
        ),
        cv.entries_to_pb,
    ),
    "Create": (
        pb.CreateRequest,
        lambda m, r: m.create(InodeId(r.parent), r.name, r.mode, r.uid, r.gid, r.rdev),
        _attr,
    ),
    "Mkdir": (
        pb.CreateRequest,
        lambda m, r: m.mkdir(InodeId(r.parent), r.name, r.mode, r.uid, r.gid),
        _attr,
    ),
    "ReserveInodes": (
        pb.ReserveInodesRequest,
        lambda m, r: m.reserve_inodes(r.count),
        lambda v: pb.ReserveInodesReply(first=v),
    ),
    "CreateAt": (
        pb.CreateRequest,
        lambda m, r: m.create_at(
            InodeId(r.parent), r.name, r.mode, r.uid, r.gid, InodeId(r.inode)
        ),
        _attr,
    ),
    "Symlink": (
        pb.SymlinkRequest,
        lambda m, r: m.symlink(InodeId(r.parent), r.name, r.target, r.uid, r.gid),
        _attr,
    ),
    "ReadLink": (
        pb.InodeRequest, lambda m, r: m.readlink(InodeId(r.inode)),
        lambda v: pb.BytesReply(value=v),
    ),
    "Link": (
        pb.LinkRequest,
        lambda m, r: m.link(InodeId(r.inode), InodeId(r.new_parent), r.new_name),
        _attr,
    ),
    "Unlink": (pb.NameRequest, lambda m, r: m.unlink(InodeId(r.parent), r.name), _attr),
    "Rmdir": (pb.NameRequest, lambda m, r: m.rmdir(InodeId(r.parent), r.name), _empty),
    "Rename": (
        pb.RenameRequest,
        lambda m, r: m.rename(
            InodeId(r.parent), r.name, InodeId(r.new_parent), r.new_name, r.flags
        ),
        _empty,
    ),
    "GetXattr": (
        pb.XattrRequest, lambda m, r: m.getxattr(InodeId(r.inode), r.name),
        lambda v: pb.BytesReply(value=v),
    ),
    "SetXattr": (
        pb.XattrRequest,
        lambda m, r: m.setxattr(InodeId(r.inode), r.name, r.value, r.flags),
        _empty,
    ),
    "ListXattr": (
        pb.InodeRequest, lambda m, r: m.listxattr(InodeId(r.inode)),
        lambda v: pb.NamesReply(names=v),
    ),
    "RemoveXattr": (
        pb.XattrRequest, lambda m, r: m.removexattr(InodeId(r.inode), r.name), _empty,
    ),
    "Refresh": (
        pb.InodeRequest, lambda m, r: m.refresh(InodeId(r.inode)), cv.invalidation_to_pb,
    ),
    "StatFs": (
        pb.VolumeRef, lambda m, r: m.statfs(), lambda v: pb.StatFsReply(stats=cv.stats_to_pb(v)),
    ),
    "ObjectKey": (
        pb.InodeRequest, lambda m, r: m.object_key(InodeId(r.inode)),
        lambda v: pb.BytesReply(value=v.encode("utf-8", "surrogateescape")),
    ),
    "CommitUpload": (
        pb.CommitUploadRequest,
        lambda m, r: m.commit_upload(
            InodeId(r.inode), r.size, r.mtime_ns, r.etag,
            r.key.decode("utf-8", "surrogateescape") or None,
        ),
        _attr,
    ),
    "CommitPending": (
        pb.CommitPendingRequest,
        lambda m, r: m.commit_pending(InodeId(r.inode), r.size, r.mtime_ns),
        _attr,
    ),
}  # fmt: skip


# RPCs about the caller's own session (open counts, liveness): their Meta call
# is given the session the call carries (``SESSION_KEY``).
SESSION_CALLS: dict[str, tuple[Any, SessionCall, Callable[[Any], Any]]] = {
    "Open": (pb.InodeRequest, lambda m, r, s: m.open(InodeId(r.inode), s), _attr),
    "Release": (pb.InodeRequest, lambda m, r, s: m.release(InodeId(r.inode), s), _empty),
    "ReleaseMany": (pb.InodesRequest, _release_many, _empty),
    "CreateOpen": (
        pb.CreateRequest,
        lambda m, r, s: m.create_open_and_parent(
            InodeId(r.parent), r.name, r.mode, r.uid, r.gid, s
        ),
        _created,
    ),
    "Heartbeat": (
        pb.VolumeRef, lambda m, r, s: m.heartbeat(s), lambda v: pb.HeartbeatReply(expires_ns=v),
    ),
    "EndSession": (pb.VolumeRef, lambda m, r, s: m.end_session(s), _empty),
}  # fmt: skip
