"""A range page's runs: every seed and setting of Task 1, Task 2 or the step decomposition, in one call.

A Task 1 / Task 2 page trains its stage-1 runs side by side first (`stage1_runs.py`), then the small stages of every
run in one pool of workers (`ranges.prefetch`), then runs the claims' setting
and every extension setting on their seeds, the claims' setting first, and stacks each run's tables into one table
per name (each row tagged with its seed and setting).
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from ..core.store import Store
from ..models.backbone import Backbone
from . import step_decomposition, ranges, stage1_runs
from ..configs.step_decomposition import DecompositionConfig
from .ranges import RangeRun
from ..configs.ranges import RangeTaskConfig

Tables = dict[str, pd.DataFrame]


def run_all(cfg: RangeTaskConfig, frames: ranges.Frames, bb: Backbone, store: Store, title: str,
            evaluate: Callable[[RangeRun], Tables], extra: Tables | None = None) -> tuple[Tables, dict[str, RangeRun]]:
    """Every seed and setting of a Task 1 / Task 2 page on its `frames`, each run scored by `evaluate`: the stacked
    tables (then `extra`) and each setting's first run by its label, the claims' setting first (for the figures: a
    page at the ceiling in the claims' setting shows one with room to rank)."""
    stage1_runs.train_page(cfg, frames, bb, store)
    ranges.prefetch(cfg, [(s, *frames(cfg, s, st)) for st in cfg.settings for s in cfg.seeds_for(st)], bb, store)
    tables, firsts = [], {}
    for st, s in ranges.every_run(cfg, title):
        run = ranges.run(cfg, frames, s, st, bb, store)
        tables.append(evaluate(run))  # right after the run: bb holds this run's trained blocks
        firsts.setdefault(st.label, run)
    return ranges.stack(tables) | (extra or {}), firsts


def run_decomposition(cfg: DecompositionConfig, bb: Backbone, store: Store) -> Tables:
    """Every seed and setting of the step-decomposition page (op experts at the config's rates), then the 2x2
    attribution where the config asks for it."""
    step_decomposition.prefetch_ops(cfg, bb, store)
    tables = [step_decomposition.run(cfg, s, st, bb, store) for st, s in ranges.every_run(cfg, "decomposition")]
    extra = {"attribution": step_decomposition.attribution(cfg, bb, store)} if cfg.attribution else {}
    return ranges.stack(tables) | extra
