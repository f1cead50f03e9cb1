"""Independent pieces of a page's work in parallel processes, every stage still going through the stage cache.

A page whose pieces (seeds, experiments, small stages) do not depend on each other can give each to a worker
process. The workers are spawned once per page process and kept (`pool`). They run the same code with the same
seeds and the same torch thread count as a serial run does for that work, so their numbers are bit-identical to
it (BLAS kernels can split a sum differently for another thread count, so that must not change): the small RED
stages train on `STAGE_THREADS` threads wherever they run (`torch_threads`). Their OpenMP threads wait
passively, so workers share the cores without spinning. What a worker computed or loaded is recorded in the
page's `Store`, as if the page had done it itself.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import threading
import time
from contextlib import contextmanager
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterator

import torch
from tqdm import tqdm

from . import kernels
from ..core.store import Store
from ..core.settings import progress_enabled

DEFAULT_WORKERS = 2
MAX_WORKERS = 16  # each worker holds a copy of a page's model and data (about 0.4 GB on the text pages)
# The small stages (batch-16 steps on features) gain nothing from a second thread: on the 2-core machine two
# 1-thread workers made 1,440 + 1,390 steps/s where two 2-thread workers made 1,059 + 1,043 (about 1.35x).
STAGE_THREADS = 1


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block on `n` torch threads, then restore the process's count."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def worker_count() -> int:
    """Processes a page trains its independent pieces in: $REDLIB_WORKERS (`--workers` of the CLI), default 2.

    A run option, not a paper parameter: any count gives the same numbers, bit for bit."""
    text = os.environ.get("REDLIB_WORKERS", str(DEFAULT_WORKERS))
    if not text.isdigit() or not 1 <= int(text) <= MAX_WORKERS:
        raise ValueError(f"REDLIB_WORKERS={text!r}: the worker count must be an integer in [1, {MAX_WORKERS}]")
    return int(text)


PieceFn = Callable[[Any, Any, Store], Any]  # fn(cfg, piece, store) -> its results; must be importable (module level)
_POOL: dict[tuple[int, int], ProcessPoolExecutor] = {}  # (workers, threads) -> the pool of this process


def _orphan_watch(parent: int) -> None:
    """End this worker as soon as the page process that spawned it is gone (killed, timed out, cancelled): a worker
    never trains on, or holds its memory, for nobody. Entries it was writing are temporary files, never used."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def _init_worker(threads: int, parent: int) -> None:
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True, name="orphan-watch").start()
    torch.set_num_threads(threads)
    kernels.configure()  # the page's matmul kernels, so a worker's bits equal a serial run's
    os.environ["REDLIB_PROGRESS"] = "0"  # one bar, the parent's
    # an interrupt (Ctrl-C, or a kernel shut down by papermill) reaches the whole process group: a worker then
    # ends quietly, where an idle one would print a KeyboardInterrupt traceback into the page's log
    signal.signal(signal.SIGINT, lambda *_: os._exit(1))


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
                                                      initializer=_init_worker, initargs=(threads, os.getpid()))
    return _POOL[workers, threads]


@atexit.register
def _close() -> None:
    for p in _POOL.values():
        p.shutdown(wait=False, cancel_futures=True)
    _POOL.clear()


def map_pieces(fn: PieceFn, cfg: Any, pieces: list[Any], store: Store, workers: int, desc: str = "runs",
               after: dict[Any, list[Any]] | None = None, threads: int | None = None) -> list[Any]:
    """[fn(cfg, piece, store) for piece in pieces], in `workers` worker processes of `threads` torch threads (by
    default this process's count) when workers > 1, in this process otherwise. A piece starts once the pieces it
    comes `after` are done; among those ready, the first in `pieces` starts first (put the longest chains first).
    The results come back in the order of `pieces`, and the workers' cache events and compute seconds are merged
    into `store`."""
    after = after or {}
    bar = tqdm(total=len(pieces), desc=desc, disable=not progress_enabled(), leave=False)
    if workers <= 1 or len(pieces) == 1:
        outs = []
        for p in pieces:  # `pieces` respects `after` (a dependency comes first)
            outs.append(fn(cfg, p, store))
            bar.update()
        bar.close()
        return outs
    done: dict[int, Any] = {}
    running: dict[Future, int] = {}
    waiting = list(range(len(pieces)))
    ready = lambda i: all(pieces.index(d) in done for d in after.get(pieces[i], []) if d in pieces)  # noqa: E731
    try:
        executor = pool(workers, threads or torch.get_num_threads())
        while waiting or running:
            for i in [i for i in waiting if ready(i)][: workers - len(running)]:
                waiting.remove(i)
                running[executor.submit(_worker, fn, cfg, pieces[i], str(store.root))] = i
            if not running:
                raise ValueError(f"map_pieces: the pieces {[pieces[i] for i in waiting]} wait on each other")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                out, events, seconds = f.result()
                store.merge(events, seconds)
                done[running.pop(f)] = out
                bar.update()
    except (BrokenProcessPool, KeyboardInterrupt):
        _close()  # a worker died (out of memory, interrupted): the next call starts a fresh pool
        raise
    finally:
        bar.close()
    return [done[i] for i in range(len(pieces))]
