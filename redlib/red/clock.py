"""What each stage of a seed cost to train: computed now, trained by a worker, or loaded (the cost its cache entry
recorded when it was trained). The page's stage-seconds table and the cost claims read these numbers.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..core.store import Store


def timed(seconds: dict[str, float], store: Store, label: str, fn: Callable[[], Any]):
    """fn(), and in `seconds[label]` what the stages it got cost to train: computed now, trained by workers, or
    loaded (the cost their cache entries recorded); the wall time of fn() where a loaded entry recorded none."""
    t0, borrowed, seen = time.time(), store.borrowed, len(store.events)
    out = fn()
    costs = [e.get("train_seconds") for e in store.events[seen:]]
    own = sum(costs) if costs and None not in costs else time.time() - t0
    seconds[label] = own + store.borrowed - borrowed
    return out
