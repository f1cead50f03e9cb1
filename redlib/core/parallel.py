"""Independent pieces of a page's work in parallel processes, every stage still going through the stage cache.

A page whose pieces (seeds, experiments) do not depend on each other can give each to a spawned worker process.
The workers use the same code, seeds and thread count as a serial run, so they produce the same numbers; what
they computed or loaded is recorded in the page's `Store`, as if the page had done it itself.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

import torch
from tqdm import tqdm

from .store import Store
from .train import progress_enabled

PieceFn = Callable[[Any, Any, Store], Any]  # fn(cfg, piece, store) -> its results; must be importable (module level)


def _worker(fn: PieceFn, cfg: Any, piece: Any, root: str, threads: int) -> tuple[Any, list[dict], dict[str, float]]:
    torch.set_num_threads(threads)
    os.environ["REDLIB_PROGRESS"] = "0"  # one bar, the parent's
    store = Store(root)
    return fn(cfg, piece, store), store.events, store.seconds


def map_pieces(fn: PieceFn, cfg: Any, pieces: list[Any], store: Store, workers: int, threads: int = 1,
               desc: str = "runs") -> list[Any]:
    """[fn(cfg, piece, store) for piece in pieces], in `workers` spawned processes with `threads` torch threads each
    when workers > 1 (in this process otherwise). Pieces start in the order given (put the longest first); the
    results come back in that order, and the workers' cache events and compute seconds are added to `store`."""
    bar = tqdm(total=len(pieces), desc=desc, disable=not progress_enabled())
    if workers <= 1 or len(pieces) == 1:
        outs = []
        for p in pieces:
            outs.append(fn(cfg, p, store))
            bar.update()
        bar.close()
        return outs
    outs = []
    with ProcessPoolExecutor(min(workers, len(pieces)), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_worker, fn, cfg, p, str(store.root), threads) for p in pieces]
        for f in futures:
            out, events, seconds = f.result()
            store.events += events
            for kind, sec in seconds.items():
                store.seconds[kind] = store.seconds.get(kind, 0.0) + sec
            outs.append(out)
            bar.update()
    bar.close()
    return outs
