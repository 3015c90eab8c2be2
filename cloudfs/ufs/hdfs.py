"""HDFS (``hdfs://namenode:8020/dir``) as an ObjectStore, through ``pyarrow.fs``.

``HdfsObjectStore`` is ``arrow.ArrowObjectStore`` (any ``pyarrow.fs`` filesystem
as a store; what HDFS makes it do differently from a local directory is listed
there) over a ``pyarrow.fs.HadoopFileSystem``, with HDFS's name rules.

``HdfsObjectStore.connect`` opens a ``pyarrow.fs.HadoopFileSystem``: libhdfs over
JNI, so it needs Java (``JAVA_HOME``), ``libhdfs.so`` (``HADOOP_HOME/lib/native``
or ``ARROW_LIBHDFS_DIR``) and the Hadoop jars in ``CLASSPATH``
(``hadoop classpath --glob``). The user is ``HADOOP_USER_NAME`` when set (simple
authentication), else the login user; core-site.xml / hdfs-site.xml on the
classpath apply, except for the timeouts below.

Time bounds. A JNI call cannot be interrupted from Python, so every call is
bounded by the Hadoop client's own timeouts, which ``HDFS_CLIENT_CONF`` sets
(overriding the site files; ``connect(extra_conf=...)`` overrides them in turn):
a namenode that refuses connections fails a call after 3 attempts 1 s apart; one
that does not accept them after 3 connect timeouts of 10 s; one that accepts but
never answers after the 60 s RPC timeout; a stalled datanode read after 60 s per
replica, a stalled write after 120 s. With HA, each of at most 3 failovers can
take that long again. Nothing else in this module waits.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs

from cloudfs.errors import InvalidArgument, NameTooLong, StartupError
from cloudfs.ufs.arrow import ArrowObjectStore
from cloudfs.ufs.arrow_errors import first_line

# Timeouts and retries of the Hadoop client (values are strings, as in XML):
# what bounds every call of this store. See the module docstring.
HDFS_CLIENT_CONF: dict[str, str] = {
    "ipc.client.connect.timeout": "10000",  # ms for one TCP connect to the namenode
    "ipc.client.connect.max.retries": "2",  # after a refused or failed connect
    "ipc.client.connect.retry.interval": "1000",  # ms between those retries
    "ipc.client.connect.max.retries.on.timeouts": "2",  # default 45: 15 minutes
    "ipc.client.rpc-timeout.ms": "60000",  # an RPC that gets no answer
    "dfs.client.socket-timeout": "60000",  # ms of silence on a datanode read
    "dfs.datanode.socket.write.timeout": "120000",  # ms of silence on a datanode write
    "dfs.client.failover.max.attempts": "3",  # HA: namenode failovers per call
}


class HdfsObjectStore(ArrowObjectStore):
    """A directory of an HDFS cluster (``hdfs://namenode:8020/datasets``)."""

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        path: str,
        *,
        user: str | None = None,
        extra_conf: dict[str, str] | None = None,
    ) -> HdfsObjectStore:
        """Load libhdfs and the JVM and make a client; the namenode is not contacted yet.

        ``port`` 0 takes the namenode (or HA nameservice ``host``) from the Hadoop
        configuration. ``user`` defaults to ``HADOOP_USER_NAME``. Raises
        ``StartupError`` (one line) when Java or libhdfs cannot be loaded.
        """
        if user is None:
            user = os.environ.get("HADOOP_USER_NAME") or None
        conf = {**HDFS_CLIENT_CONF, **(extra_conf or {})}
        base = "/" + path.strip("/")
        name_node = f"[{host}]" if ":" in host and not host.startswith("[") else host  # IPv6
        where = f"{name_node}:{port}" if port else name_node
        uri = f"hdfs://{where}{base.rstrip('/')}"
        try:
            fs = pafs.HadoopFileSystem(
                name_node, port, user=user, replication=0, extra_conf=conf
            )  # replication 0: the cluster's dfs.replication
        except (OSError, pa.ArrowException) as err:
            raise StartupError(_connect_error(where, err)) from err
        return cls(fs, base, uri)

    def validate_key(self, key: str, *, directory: bool = False) -> None:
        """What the namenode refuses: see ``validate_hdfs_path``."""
        super().validate_key(key, directory=directory)
        validate_hdfs_path(self._path(key))


HDFS_PATH_MAX = 8000  # NameNodeRpcServer.MAX_PATH_LENGTH, in characters
HDFS_DEPTH_MAX = 1000  # NameNodeRpcServer.MAX_PATH_DEPTH, in components
HDFS_COMPONENT_MAX = 255  # dfs.namenode.fs-limits.max-component-length's default, in bytes


def validate_hdfs_path(path: str) -> None:
    """Raise for an absolute HDFS path the namenode would refuse to create.

    ``DFSUtil.isValidName``: no component is ".", ".." or empty, and none holds
    ":" (``InvalidArgument``, EINVAL); "/.reserved" is the namenode's own
    (EINVAL). ``NameNodeRpcServer.checkPathLength``: at most 8000 characters and
    1000 components; and a component at most 255 bytes (``NameTooLong``).
    """
    if not path.strip("/"):
        return  # the root
    parts = path.strip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidArgument(f"{path!r}: HDFS paths have no '.', '..' or empty components")
    if any(":" in p for p in parts):
        raise InvalidArgument(f"{path!r}: HDFS names cannot contain ':'")
    if parts[0] == ".reserved":
        raise InvalidArgument(f"{path!r}: /.reserved is reserved by the HDFS namenode")
    if len(path) > HDFS_PATH_MAX or len(parts) > HDFS_DEPTH_MAX:
        raise NameTooLong(
            f"HDFS paths are at most {HDFS_PATH_MAX} characters and {HDFS_DEPTH_MAX} deep"
        )
    if any(len(p.encode("utf-8", "surrogateescape")) > HDFS_COMPONENT_MAX for p in parts):
        raise NameTooLong(f"HDFS names are at most {HDFS_COMPONENT_MAX} bytes")


def _connect_error(where: str, err: BaseException) -> str:
    """One line for a failed ``HadoopFileSystem(...)``, saying what to install or set."""
    first = first_line(err)
    if "libjvm" in first:
        return f"cannot use hdfs://{where}: {first} (install Java and set JAVA_HOME)"
    if "libhdfs" in first:
        return (
            f"cannot use hdfs://{where}: {first} (set HADOOP_HOME or ARROW_LIBHDFS_DIR "
            "to the directory holding libhdfs.so)"
        )
    return (
        f"cannot use hdfs://{where}: {first} (is CLASSPATH set to the output of "
        "'hadoop classpath --glob'?)"
    )
