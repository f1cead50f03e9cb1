"""A range page's stage-1 runs, trained side by side in worker processes before the page needs them.

Stage 1 (the encoder's top and the global head) is the dearest stage, and every run of a page, each (setting, seed),
trains its own. All of them are known before they train and none depends on another, so `parallel.worker_count()`
processes train them at once into the stage cache, each on `THREADS` torch threads; the page then loads each where
it would have trained it. With the page's own thread count (`THREADS = None`) a run trains in a worker the same bits
as in the page, so the numbers do not depend on the worker count (`tests/test_stage1_runs.py`).

Each worker holds its run's frozen-prefix states (Task 2: about 1.7 GB), so the runs train side by side only where
the memory free at the start holds every worker's (`fits_in_memory`); elsewhere the page trains them one after
another, with the same bits.

Runs that train at once share the cores, so each one's own wall time overstates what it cost: a run records as its
seconds its share of the time it trained, each moment divided among the runs training then (`overlap_shares`). Over
a page, stage 1's seconds then add up to the wall time stage 1 took, as they do one run after another.
"""

from __future__ import annotations

import time
import warnings

import psutil
import torch

from ..core.store import Store
from . import ranges
from ..configs.ranges import RangeTaskConfig, Setting
from ..models.backbone import Backbone
from ..red.encoders import TextEncoder
from ..red.stages import Stages
from ..speed import parallel

# a data setting, a seed, stage 1's learning rate
Stage1Run = tuple[Setting, int, float]
THREADS: int | None = None  # torch threads of each worker; None: the page's own count (a serial run's bits)
# what a stage-1 worker holds besides its prefix states (torch, the backbone, the data, training): 1.2 GB measured in
# Task 2's workers on the embedded backbone, rounded up
WORKER_BYTES = 1.5 * 2**30


def page_runs(cfg: RangeTaskConfig) -> list[Stage1Run]:
    """Every (setting, seed) the page runs, at the config's stage-1 rate `lr`."""
    return [(st, seed, cfg.lr) for st in cfg.settings for seed in cfg.seeds_for(st)]


def train_page(cfg: RangeTaskConfig, frames: ranges.Frames, bb: Backbone, store: Store) -> None:
    """The page's stage-1 runs (on its `frames`) side by side, before its loop loads them."""
    train_side_by_side(cfg, frames, page_runs(cfg), bb, store)


def train_side_by_side(cfg: RangeTaskConfig, frames: ranges.Frames, runs: list[Stage1Run], bb: Backbone,
                       store: Store) -> None:
    """Train the runs whose stage 1 the cache does not hold, side by side in worker processes (on CPU, with more than
    one worker and more than one such run); each data set's frozen-prefix states are computed here first, once."""
    workers = parallel.worker_count()
    if workers <= 1 or bb.device.type != "cpu":
        return
    datasets: dict[tuple, tuple] = {}  # one per data set: the runs of a seed and data setting share it
    todo = [run for run in runs if not _stages(cfg, frames, run, bb, store, datasets).stage1_cached()]
    if len(todo) < 2 or not fits_in_memory([enc.prefix_bytes for _, enc in datasets.values()], workers):
        return
    for _, enc in datasets.values():
        enc.prefix  # noqa: B018 - computed and cached here, not by two workers at once
        enc.release()
    spans = parallel.map_pieces(_train, (cfg, frames), todo, store, workers, "stage-1 runs",
                                threads=THREADS or torch.get_num_threads())
    for run, share in zip(todo, overlap_shares(spans)):
        st = _stages(cfg, frames, run, bb, store, datasets)
        store.restate_seconds(st.kind("stage1"), st.stage1_key(), share)


def fits_in_memory(prefix_bytes: list[int], workers: int) -> bool:
    """Whether `workers` stage-1 workers, each holding the largest of these prefixes, fit in the memory free now;
    a warning says so where they do not (the page then trains its runs one after another)."""
    need, free = workers * (max(prefix_bytes) + WORKER_BYTES), psutil.virtual_memory().available
    if need > free:
        warnings.warn(f"stage-1 runs train one after another: {workers} workers side by side would need about "
                      f"{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB is free", stacklevel=2)
    return need <= free


def overlap_shares(spans: list[tuple[float, float]]) -> list[float]:
    """Each (start, end)'s share of the time: every moment divided equally among the spans that cover it."""
    cuts = sorted({t for span in spans for t in span})
    shares = [0.0] * len(spans)
    for a, b in zip(cuts, cuts[1:]):
        active = [i for i, (s, e) in enumerate(spans) if s <= a and e >= b]
        for i in active:
            shares[i] += (b - a) / len(active)
    return shares


def _stages(cfg: RangeTaskConfig, frames: ranges.Frames, run: Stage1Run, bb: Backbone, store: Store,
            datasets: dict[tuple, tuple] | None = None) -> Stages:
    """The stages of one run (stage 1 at its rate) on its data set (the page's `frames`) and encoder, made once per
    data set in `datasets`."""
    setting, seed, lr = run
    datasets = {} if datasets is None else datasets
    which = (setting.split, setting.number_format, seed)
    if which not in datasets:
        data, texts = ranges.task_data(cfg.KEY, *frames(cfg, seed, setting))
        datasets[which] = data, TextEncoder(bb, texts, store, cfg.KEY)
    data, enc = datasets[which]
    return Stages(cfg, data, enc, store, seed, settings=cfg.stage_settings({"stage1": lr}))


def _train(page: tuple[RangeTaskConfig, ranges.Frames], run: Stage1Run, store: Store) -> tuple[float, float]:
    """In a worker: train one run's stage 1 into the shared cache (only what it computed is this piece's event); the
    clock times its training started and ended. `page`: the page's config and frames."""
    cfg, frames = page
    st = _stages(cfg, frames, run, ranges.backbone(cfg), store)
    st.encoder.prefix  # noqa: B018 - its data set's prefix, loaded before the clock starts
    start = time.time()
    st.base()
    end = time.time()
    store.events[:] = [e for e in store.events if e["event"] != "loaded"]
    return start, end
