"""A range page's runs: every seed and setting of Task 1 or Task 2, in one call.

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
from ..red import methods
from . import ranges, stage1_runs
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


# the paper's own epoch budgets for the small stages (its final setup: at most 60 epochs, patience 3; its first,
# 4.2.2: 8 epochs without early stopping), each run as a labelled extension on the claims' setting's first seed
PAPER_BUDGETS = {"the paper's: at most 60 epochs, patience 3": {"max_epochs": 60, "patience": 3, "double_cap": False},
                 "the first setup's: 8 epochs, no early stopping": {"max_epochs": 8, "patience": 8, "double_cap": False}}


def paper_budgets(cfg: RangeTaskConfig, frames: ranges.Frames, bb: Backbone, store: Store) -> Tables:
    """The claims' setting's first seed again, its stage 1 the same (loaded), its experts, gate and router trained
    under each of the paper's epoch budgets (the best validation state kept, as always): each method's test accuracy
    per budget (`paper_budget`), each stage's epochs and its seconds (`paper_budget_epochs`, `paper_budget_seconds`).
    No verdict reads them. They train through a store of their own on the same cache, so the page's record of what
    its protocol's runs cost (the cost claims read it) leaves them out."""
    setting, seed, aside = cfg.settings[0], cfg.seed, Store(store.root)
    scores, epochs, seconds = [], [], []
    for label, budget in PAPER_BUDGETS.items():
        run = ranges.run_on(cfg, cfg.KEY, seed, setting, *frames(cfg, seed, setting), bb, aside,
                            settings=cfg.stage_settings(budget=budget), variants=False)
        scores.append(run.tag(methods.score(run.red, "test")[0][["method", "accuracy"]]).assign(budget=label))
        epochs.append(run.tag(pd.DataFrame(run.red.epochs[1:])).assign(budget=label))  # [0]: stage 1, loaded
        seconds.append(run.tag(pd.DataFrame([run.red.seconds])).assign(budget=label))
    return {"paper_budget": pd.concat(scores, ignore_index=True),
            "paper_budget_epochs": pd.concat(epochs, ignore_index=True),
            "paper_budget_seconds": pd.concat(seconds, ignore_index=True)}
