"""A range page's stage-1 runs, trained side by side in worker processes before the page needs them.

Stage 1 (the encoder's top and the global head) is the dearest stage, and every run of a page trains its own: the
first seed's tries at every rate of the learning-rate grid, then each (setting, seed) at the rate it trains at.
All of them are known before they train and none depends on another, so `parallel.worker_count()` processes
train them at once into the stage cache, each on `THREADS` torch threads; the page then loads each where it would
have trained it. With the page's own thread count (`THREADS = None`) a run trains in a worker the same bits as in
the page, so the numbers do not depend on the worker count (`tests/test_stage1_runs.py`).

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

import pandas as pd
import psutil
import torch

from ..core.store import Store
from . import ranges
from ..configs.ranges import RangeTaskConfig, Setting
from ..models.backbone import Backbone
from ..red import selection
from ..red.encoders import TextEncoder
from ..red.selection import LrChoice
from ..red.stages import Stages
from ..speed import parallel

# a data setting, a seed, stage 1's learning rate (and an epoch cap: a rung of the selection's successive halving)
Stage1Run = tuple[Setting, int, float] | tuple[Setting, int, float, int | None]
THREADS: int | None = None  # torch threads of each worker; None: the page's own count (a serial run's bits)
# what a stage-1 worker holds besides its prefix states (torch, the backbone, the data, training): 1.2 GB measured in
# Task 2's workers on the embedded backbone, rounded up
WORKER_BYTES = 1.5 * 2**30


def grid_runs(cfg: RangeTaskConfig, cap: int | None = None, rates: list[float] | None = None) -> list[Stage1Run]:
    """The stage-1 tries on the claims' setting at every rate of the grid (or `rates`), on every seed of the protocol
    (the selection's first round), capped at `cap` epochs (a rung) or not."""
    main = cfg.settings[0]
    return [(main, seed, lr, cap) for lr in (cfg.lr_grid() if rates is None else rates) for seed in cfg.seeds_for(main)]


def rung_survivors(cfg: RangeTaskConfig, bb: Backbone, store: Store) -> list[float]:
    """Stage 1's rates that go on after the rung (`selection.survivors`, from the rung tries' cache entries); the
    whole grid without a rung; none where a rung try is not cached (the page's selection then trains it, and only
    its own survivors to the end: no rate is trained to the end here before its rung is known)."""
    if not cfg.lr_rung:
        return cfg.lr_grid()
    runs, datasets = grid_runs(cfg, cfg.lr_rung), {}
    metas = [(run, _stages(cfg, run, bb, store, datasets).stage1_meta()) for run in runs]
    if any(m is None for _, m in metas):
        return []
    at_rung = pd.DataFrame([{"kind": "stage1", "lr": run[2], "val loss": m["val_loss"]} for run, m in metas])
    return selection.survivors(at_rung.groupby(["kind", "lr"], sort=False, as_index=False).mean(), cfg.lr_keep)["stage1"]


def page_runs(cfg: RangeTaskConfig, choice: LrChoice) -> list[Stage1Run]:
    """Every (setting, seed) the page runs, at the stage-1 rate it trains at (the choice, or the config's `lr`)."""
    return [(st, seed, ranges.lrs_for(choice, st, cfg.lr).get("stage1", cfg.lr))
            for st in cfg.settings for seed in cfg.seeds_for(st)]


def choose(cfg: RangeTaskConfig, bb: Backbone, store: Store) -> LrChoice:
    """`ranges.choose`, with the page's stage-1 runs trained side by side: the grid's tries before the choice, every
    (setting, seed) of the page after it; the page's loop then loads them."""
    train_grid(cfg, bb, store)
    choice = ranges.choose(cfg, bb, store)
    train_side_by_side(cfg, page_runs(cfg, choice), bb, store)
    return choice


def train_grid(cfg: RangeTaskConfig, bb: Backbone, store: Store) -> None:
    """The selection's stage-1 tries side by side: with a rung (`lr_rung`), every rate's rung on every seed, then only
    the survivors to the end; without, every rate to the end."""
    if cfg.lr_rung:
        train_side_by_side(cfg, grid_runs(cfg, cfg.lr_rung), bb, store)
    train_side_by_side(cfg, grid_runs(cfg, rates=rung_survivors(cfg, bb, store)), bb, store)


def train_side_by_side(cfg: RangeTaskConfig, runs: list[Stage1Run], bb: Backbone, store: Store) -> None:
    """Train the runs whose stage 1 the cache does not hold, side by side in worker processes (on CPU, with more than
    one worker and more than one such run); each data set's frozen-prefix states are computed here first, once."""
    workers = parallel.worker_count()
    if workers <= 1 or bb.device.type != "cpu":
        return
    datasets: dict[tuple, tuple] = {}  # one per data set: the runs of a seed and data setting share it
    todo = [run for run in runs if not _stages(cfg, run, bb, store, datasets).stage1_cached()]
    if len(todo) < 2 or not fits_in_memory([enc.prefix_bytes for _, enc in datasets.values()], workers):
        return
    for _, enc in datasets.values():
        enc.prefix  # noqa: B018 - computed and cached here, not by two workers at once
        enc.release()
    # the lowest rates first: they run the most epochs, and a long run started last would leave a worker idle
    todo.sort(key=lambda run: run[2])
    spans = parallel.map_pieces(_train, cfg, todo, store, workers, "stage-1 runs", threads=THREADS or torch.get_num_threads())
    for run, share in zip(todo, overlap_shares(spans)):
        st = _stages(cfg, run, bb, store, datasets)
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


def _stages(cfg: RangeTaskConfig, run: Stage1Run, bb: Backbone, store: Store,
            datasets: dict[tuple, tuple] | None = None) -> Stages:
    """The stages of one run (stage 1 at its rate) on its data set and encoder, made once per data set in `datasets`."""
    setting, seed, lr, cap = (*run, None)[:4]
    datasets = {} if datasets is None else datasets
    which = (setting.split, setting.number_format, seed)
    if which not in datasets:
        namespace, frames, key, domain = ranges.stage1_data(cfg, seed, setting)
        data, texts = ranges.task_data(namespace, frames, key, domain)
        datasets[which] = data, TextEncoder(bb, texts, store, namespace)
    data, enc = datasets[which]
    return Stages(cfg, data, enc, store, seed, lrs={"stage1": lr}, caps={"stage1": cap} if cap else None)


def _train(cfg: RangeTaskConfig, run: Stage1Run, store: Store) -> tuple[float, float]:
    """In a worker: train one run's stage 1 into the shared cache (only what it computed is this piece's event); the
    clock times its training started and ended."""
    st = _stages(cfg, run, ranges.backbone(cfg), store)
    st.encoder.prefix  # noqa: B018 - its data set's prefix, loaded before the clock starts
    start = time.time()
    st.base()
    end = time.time()
    store.events[:] = [e for e in store.events if e["event"] != "loaded"]
    return start, end
