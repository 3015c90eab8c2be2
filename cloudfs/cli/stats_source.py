"""Where ``cloudfs stats`` gets a snapshot: a mount's control socket, or a ``--metrics``
endpoint of a process without a mount (the S3 gateway, a ``cloudfs://`` user, a
cache worker).

Either way the answer is Prometheus text, parsed by ``stats_model``; a mount adds
facts of its own (mountpoint, UFS, pid...), an endpoint only ``endpoint`` (its
URL), which is what tells the view to leave the FUSE rows out.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from cloudfs.cli.stats_model import Snapshot, parse_snapshot
from cloudfs.control import client
from cloudfs.errors import StartupError

TIMEOUT = 10.0  # seconds to wait for the answer
MAX_TEXT = 64 * 1024 * 1024  # an exposition larger than this is not one of ours


def is_endpoint(target: str) -> bool:
    """``http://HOST:PORT[/metrics]`` or ``HOST:PORT``, not a path."""
    if target.startswith(("http://", "https://")):
        return True
    host, sep, port = target.rpartition(":")
    return bool(sep and host and port.isdigit() and "/" not in target)


def endpoint_url(target: str) -> str:
    url = target if target.startswith(("http://", "https://")) else f"http://{target}"
    rest = url.partition("://")[2]
    return url if "/" in rest else f"{url}/metrics"


def fetch(target: str) -> Snapshot:
    """One snapshot of ``target``: a mountpoint, or an endpoint (``is_endpoint``)."""
    if is_endpoint(target):
        return _from_endpoint(endpoint_url(target))
    answer = client.result(target, {"op": "metrics"}, timeout=TIMEOUT)
    text = answer.get("text")
    if not isinstance(text, str):
        raise StartupError(f"{target}: the mount answered without metrics")
    facts = {k: v for k, v in answer.items() if k not in ("text", "done")}
    return parse_snapshot(text, facts, time.monotonic())


def _from_endpoint(url: str) -> Snapshot:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as reply:
            body = reply.read(MAX_TEXT + 1)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise StartupError(f"{url}: no metrics there ({reason})") from None
    if len(body) > MAX_TEXT:
        raise StartupError(f"{url}: the answer is too large to be CloudFS metrics")
    try:
        return parse_snapshot(body.decode(), {"endpoint": url}, time.monotonic())
    except ValueError as e:  # not Prometheus text (some other server on that port)
        raise StartupError(f"{url}: not Prometheus metrics ({e})") from None
