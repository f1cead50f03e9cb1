"""The fit loop's settings as plain data, and the questions asked of them without training (no torch here: a
config that builds them, and the command line, load fast)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class TrainSettings:
    """The training knobs every config shares (the paper's: AdamW lr 1e-4, batch 16 -> 64, 60 epochs, patience 3)."""

    lr: float = 1e-4
    weight_decay: float = 0.01
    batch_size: int = 16
    virtual_batch: int = 64
    max_epochs: int | None = 60
    patience: int | None = 3


# AdamW's implementation: "fused" (one kernel updates every parameter) where the device has it, else "foreach".
# Both compute AdamW's fp32 update and round it differently; on the 2-core machine fused trains the small stages
# about 1.5x as many steps per second and stage 1 about 7% faster (`make bench`'s `optimizer` entry).
ADAMW = "fused"
ADAMW_KINDS = ("fused", "foreach")

# a fit's arithmetic: "fp32", or "bf16" (its forward and backward under bf16 autocast; fp32 master weights, AdamW
# state and update). Only stage 1 offers the choice (the paper trained its backbone stage in mixed precision).
PRECISIONS = ("fp32", "bf16")


@dataclass
class TrainConfig(TrainSettings):
    """One fit: the knobs, plus the improvement that counts, the stage's seed, its progress label and the AdamW
    implementation (part of every stage's cache key: another rounds the last bits differently)."""

    min_delta: float = 0.0
    seed: int = 0
    desc: str = "train"
    optimizer: str = ADAMW
    double_cap: bool = False  # the convergence rule: a fit that reaches its cap trains on with the cap doubled
    precision: str = "fp32"  # one of PRECISIONS


@dataclass(frozen=True)
class StageSettings:
    """A run's training settings, resolved once from its page's config before anything trains
    (`RedConfig.stage_settings`) and handed to every stage and worker: stage 1's fit, the small stages' fit, and
    the rates an extension gives some stage kinds. A stage's fit is one of these with its seed and label set."""

    stage1: TrainConfig
    small: TrainConfig
    lrs: Mapping[str, float] = field(default_factory=dict)  # stage kind -> its rate, where an extension sets one

    def lr(self, kind: str) -> float:
        """The learning rate of the stages of `kind`."""
        return self.stage1.lr if kind == "stage1" else self.lrs.get(kind, self.small.lr)

    def fit(self, kind: str, seed: int, desc: str = "") -> TrainConfig:
        """One stage's fit: stage 1's (its label its own), or a small stage's of `kind`, labelled `desc`."""
        if kind == "stage1":
            return replace(self.stage1, seed=seed)
        return replace(self.small, lr=self.lr(kind), seed=seed, desc=desc)


# the convergence rule never doubles a cap past this (a fit still improving there ends with `stopped_early` False)
CAP_LIMIT = 100_000


def still_improving(best_epoch, max_epochs, patience):
    """Whether a stage was still improving when its epoch cap stopped it: its best epoch (0-based) lies within
    `patience` of the cap. Scalars or pandas columns alike."""
    return best_epoch >= max_epochs - patience


def ended_at_cap(epochs: pd.DataFrame) -> pd.Series:
    """Per row of an epochs table: the stage ended at its cap rather than by patience (the convergence rule's
    failure: not stopped by patience, or as many epochs run as its cap)."""
    return ~epochs["stopped by patience"].astype(bool) | (epochs["epochs run"] >= epochs["max epochs"])


def progress_enabled() -> bool:
    """tqdm bars on unless REDLIB_PROGRESS=0, or CI is set and REDLIB_PROGRESS is not 1."""
    setting = os.environ.get("REDLIB_PROGRESS", "auto")
    return setting == "1" or (setting == "auto" and not os.environ.get("CI"))
