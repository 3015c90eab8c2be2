"""Every tree server's commits, from etcd's watch, published to this server's change feeds.

With several tree servers on one etcd, a mount connected to server A must
hear of a file that a mount on server B just closed (close-to-open). Each
server therefore watches the keys of every tree (``T<tree id><tree key>``,
see ``volumes``) and turns each commit's events into a ``Change`` for the
feed of that tree's volume, if this server has one. The committing
transaction wrote its session into ``codec.ORIGIN_KEY`` (``WatchedKV``), so the
mount that made a change is not told about it. When the watch lost events
(etcd compacted them before this server read them) every subscriber is told
so and drops what it cached.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable

from cloudfs.meta.engine import codec
from cloudfs.meta.engine.etcd_txn import prefix_end
from cloudfs.meta.engine.kv import SharedKV, WatchEvent
from cloudfs.meta.service.changes import ChangeFeed, change_of

log = logging.getLogger(__name__)

TREE_ID_BYTES = 8


class ChangePump:
    """Runs the watch of ``trees_prefix`` in a thread; ``feed_of(tree id)`` routes changes."""

    def __init__(
        self,
        engine: SharedKV,
        trees_prefix: bytes,
        feed_of: Callable[[bytes], ChangeFeed | None],
        every_feed: Callable[[], Iterable[ChangeFeed]],
    ) -> None:
        self._cut = len(trees_prefix)
        self._feed_of = feed_of
        self._every_feed = every_feed
        self._watch = engine.watch(trees_prefix, prefix_end(trees_prefix))
        self._thread = threading.Thread(target=self._run, name="cloudfs-change-pump", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            for batch in self._watch:
                if batch is None:
                    log.warning("the etcd watch lost changes: every mount drops its caches")
                    for feed in self._every_feed():
                        feed.lose()
                else:
                    self._publish(batch)
        except Exception:  # the thread must not die silently: mounts would go stale
            log.exception("the change pump stopped")

    def _publish(self, batch: list[WatchEvent]) -> None:
        commits: dict[tuple[bytes, int], set[bytes]] = defaultdict(set)
        origins: dict[tuple[bytes, int], str] = {}
        for event in batch:
            tree = event.key[self._cut : self._cut + TREE_ID_BYTES]
            key = event.key[self._cut + TREE_ID_BYTES :]
            if key == codec.ORIGIN_KEY:
                origins[tree, event.revision] = (event.value or b"").decode(errors="replace")
            else:
                commits[tree, event.revision].add(key)
        for (tree, revision), keys in commits.items():
            feed = self._feed_of(tree)
            change = change_of(keys, origins.get((tree, revision), ""))
            if feed is not None and change is not None:
                feed.publish(change)

    def close(self) -> None:
        self._watch.close()
        self._thread.join(timeout=5)
