"""What a run costs the machine: peak memory and CPU seconds of its process and every worker it starts, together.

A page trains its small stages in worker processes, so the kernel's own `ru_maxrss` misses most of the work. A
background thread samples the resident memory of the process tree (the page and its descendants) and keeps the
largest sum seen; CPU seconds add each process's last reading (workers that ended included).
"""

from __future__ import annotations

import resource
import threading

import psutil

INTERVAL_S = 0.25


class TreeUsage:
    """Samples this process and its descendants from `start()` to `stop()`; `report()` says what they used."""

    def __init__(self, interval: float = INTERVAL_S):
        self.interval = interval
        self.peak_bytes = 0
        self._cpu: dict[int, float] = {}  # pid -> its latest user + system seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._me = psutil.Process()

    def start(self) -> "TreeUsage":
        """Begin sampling in a daemon thread."""
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="tree-usage")
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        total = 0
        for proc in [self._me, *self._me.children(recursive=True)]:
            try:
                with proc.oneshot():
                    total += proc.memory_info().rss
                    t = proc.cpu_times()
                    self._cpu[proc.pid] = t.user + t.system
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        self.peak_bytes = max(self.peak_bytes, total)

    def stop(self) -> None:
        """Take a last sample and end the thread."""
        self._sample()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def report(self) -> dict[str, float]:
        """Peak memory of the tree and of this process alone (MiB), and the tree's CPU seconds so far."""
        self._sample()
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return {"peak_rss_mb_with_workers": round(max(self.peak_bytes / 2**20, own), 1),
                "peak_rss_mb": round(own, 1), "cpu_seconds": round(sum(self._cpu.values()), 1),
                "sampled_every_s": self.interval}
