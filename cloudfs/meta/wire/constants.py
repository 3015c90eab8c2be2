"""The names and limits both ends of the tree service's gRPC wire agree on.

Message sizes: a request is at most ``MAX_REQUEST_BYTES`` (the largest real
one, a SetXattr value or a 4 KiB symlink target, is far smaller) and a reply
at most ``MAX_REPLY_BYTES`` (a ReadDir page); the server sets them as its
receive and send limits, the clients the other way round.
"""

from __future__ import annotations

MiB = 1024 * 1024
MAX_REQUEST_BYTES = 4 * MiB
MAX_REPLY_BYTES = 64 * MiB
MAX_RELEASES = 64  # inodes in one ReleaseMany (one transaction: etcd caps its operations)

META_SERVICE = "cloudfs.v1.MetaService"
VOLUME_SERVICE = "cloudfs.v1.VolumeService"
GROUP_SERVICE = "cloudfs.v1.CacheGroupService"
REPORT_SERVICE = "cloudfs.v1.CacheReportService"

SESSION_KEY = "cloudfs-session"  # call metadata: the mount session a call belongs to
ERRNO_KEY = "cloudfs-errno"  # trailing metadata: the exact errno of a failed call
