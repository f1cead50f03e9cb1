"""Independent pieces of a page's work in parallel processes, every stage still going through the stage cache.

A page whose pieces (seeds, experiments, small stages) do not depend on each other can give each to a worker
process. The workers are spawned once per page process and kept (`pool`). They run the same code with the same
seeds and as many torch threads as the page, so their numbers are bit-identical to a serial run (BLAS kernels
can split a sum differently for another thread count, so that must not change). Their OpenMP threads wait
passively, so two workers with two threads share two cores without spinning. What a worker computed or loaded
is recorded in the page's `Store`, as if the page had done it itself.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

import torch
from tqdm import tqdm

from .store import Store
from .train import progress_enabled

PieceFn = Callable[[Any, Any, Store], Any]  # fn(cfg, piece, store) -> its results; must be importable (module level)
_POOL: dict[tuple[int, int], ProcessPoolExecutor] = {}  # (workers, threads) -> the pool of this process


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)
    os.environ["REDLIB_PROGRESS"] = "0"  # one bar, the parent's


def _worker(fn: PieceFn, cfg: Any, piece: Any, root: str) -> tuple[Any, list[dict], dict[str, float]]:
    store = Store(root)
    return fn(cfg, piece, store), store.events, store.seconds


def pool(workers: int, threads: int) -> ProcessPoolExecutor:
    """`workers` spawned processes with `threads` torch threads each, started on first use and kept until exit."""
    if (workers, threads) not in _POOL:
        for old in _POOL.values():
            old.shutdown()
        _POOL.clear()
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # read by the workers' OpenMP at start (this process's has started)
        _POOL[workers, threads] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                      initializer=_init_worker, initargs=(threads,))
    return _POOL[workers, threads]


@atexit.register
def _close() -> None:
    for p in _POOL.values():
        p.shutdown(cancel_futures=True)
    _POOL.clear()


def map_pieces(fn: PieceFn, cfg: Any, pieces: list[Any], store: Store, workers: int, desc: str = "runs") -> list[Any]:
    """[fn(cfg, piece, store) for piece in pieces], in `workers` worker processes (with this process's torch thread
    count) when workers > 1, in this process otherwise. Pieces start in the order given (put the longest first); the results come back in that order, and
    the workers' cache events and compute seconds are merged into `store`."""
    bar = tqdm(total=len(pieces), desc=desc, disable=not progress_enabled(), leave=False)
    outs = []
    if workers <= 1 or len(pieces) == 1:
        for p in pieces:
            outs.append(fn(cfg, p, store))
            bar.update()
        bar.close()
        return outs
    try:
        futures = [pool(workers, torch.get_num_threads()).submit(_worker, fn, cfg, p, str(store.root)) for p in pieces]
        for f in futures:
            out, events, seconds = f.result()
            store.merge(events, seconds)
            outs.append(out)
            bar.update()
    except BrokenProcessPool:
        _POOL.clear()  # a worker died (out of memory, killed): the next call starts a fresh pool
        raise
    finally:
        bar.close()
    return outs
