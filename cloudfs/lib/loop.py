"""``Loop``: a step run now and every ``interval`` seconds in a daemon thread.

What a cache-group member's heartbeat, a mount's group listing and its cache
report each are: a blocking call, repeated until stopped, whose failures are
logged once per change of state (failing, working again), not once per try.
"""

from __future__ import annotations

import logging
import threading

from cloudfs.errors import FsError

log = logging.getLogger(__name__)

STOP_SECONDS = 6.0  # the longest ``stop`` waits for a step under way (two 3 s calls)


class Loop:
    """Run ``step`` now and every ``interval`` seconds in a daemon thread until stopped;
    log its failures once per change of state."""

    def __init__(
        self, name: str, interval: float, what: str, *, stop_seconds: float = STOP_SECONDS
    ) -> None:
        """``name``: the thread's; ``what``: the step, as the log says it ("joining
        cache group G as A"); ``stop_seconds``: how long ``stop`` waits for a step."""
        self._interval = interval
        self._what = what
        self._stop_seconds = stop_seconds
        self._stopping = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._stop_seconds)

    def step(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stopping.is_set():
            self.tick()
            self._stopping.wait(self._interval)

    def tick(self) -> bool:
        """One step; whether it worked (failures are logged, never raised)."""
        try:
            self.step()
        except FsError as exc:
            if not self._failing:
                log.warning("%s failed, trying every %g s: %s", self._what, self._interval, exc)
            self._failing = True
            return False
        except Exception:
            log.exception("%s failed; trying again in %g s", self._what, self._interval)
            self._failing = True
            return False
        if self._failing:
            log.info("%s works again", self._what)
        self._failing = False
        return True
