"""Arithmetic Task 1 (addition): questions, answer classes 2..100, output ranges R1-R5, splits, JSONL export.

Only (hi - lo + 1)^2 distinct operand pairs exist (2,500 for [1, 50]), so a dataset of tens of thousands
of samples repeats pairs. `split="iid"` samples as the paper does, so the same question can be in train
and test (test measures recall); `split="pairs"` first divides the distinct pairs (test share
`test_share`, val 10%, the rest train: no pair in two splits, so test measures generalisation).

Two data sources: `text`, the paper's text (a, b uniform in [operand_min, operand_max]), and `released`,
the authors' released generator (the sum s uniform over 2..99, then a uniform in [0, s] and b = s - a).
Two number formats: `whole` ("57", the paper's template) and `digits` ("5 7": one token per digit on a
WordPiece backbone, as Qwen3's tokenizer reads numbers).

What the data are, as plain definitions (numpy only: the configs read them before torch loads); the frames are
drawn in `arithmetic_data.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

TEMPLATES = (
    "What is {a} plus {b}?",
    "What is the sum of {a} and {b}?",
    "Add {a} and {b}.",
    "How much is {a} + {b}?",
    "Compute {a} plus {b}.",
)
RANGES: list[tuple[int, int]] = [(2, 20), (21, 40), (41, 60), (61, 80), (81, 100)]
RANGE_NAMES = [f"R{i + 1} [{lo},{hi}]" for i, (lo, hi) in enumerate(RANGES)]
MIN_SUM, MAX_SUM = 2, 100
N_CLASSES = MAX_SUM - MIN_SUM + 1  # 99 answer classes: 2..100
BOUNDARY_SUMS = (20, 21, 40, 41, 60, 61, 80, 81)
SPLITS = ("pairs", "iid")
NUMBER_FORMATS = ("whole", "digits")
DATA_SOURCES = ("text", "released")
RELEASED_MAX_SUM = 99  # the released generator draws sums 2..99
VAL_SHARE = 0.1  # share of the distinct pairs in val on the pairs split


def range_of(s) -> np.ndarray:
    """Range index 0-4 (R1..R5) of each sum."""
    s = np.asarray(s)
    return np.clip(np.searchsorted([hi for _, hi in RANGES], s, side="left"), 0, len(RANGES) - 1)


def format_numbers(text: str, number_format: str) -> str:
    """The text with every integer written whole ("57") or digit by digit ("5 7")."""
    if number_format not in NUMBER_FORMATS:
        raise ValueError(f"unknown number_format {number_format!r}; allowed: {', '.join(NUMBER_FORMATS)}")
    return text if number_format == "whole" else re.sub(r"\d+", lambda m: " ".join(m.group()), text)


def label_of(s) -> np.ndarray:
    """Class index of each sum (sum - 2)."""
    return np.asarray(s) - MIN_SUM


@dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """What every arithmetic dataset has: its three sizes, its split kind, its seed and its number format."""

    n_train: int = 64_000
    n_val: int = 8_000
    n_test: int = 8_000
    split: str = "iid"
    seed: int = 0
    number_format: str = "whole"

    SPLITS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        for name, allowed in (("split", self.SPLITS), ("number_format", NUMBER_FORMATS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; allowed: {', '.join(allowed)}")


@dataclass(frozen=True, kw_only=True)
class Task1Spec(DatasetSpec):
    """What determines a Task 1 dataset: operand range, templates and source, with the sizes, split and seed."""

    operand_min: int = 1
    operand_max: int = 50
    n_templates: int = 1
    data_source: str = "text"
    test_share: float = 0.2  # share of the distinct pairs in test, pairs split only

    SPLITS: ClassVar[tuple[str, ...]] = SPLITS

    def __post_init__(self):
        super().__post_init__()
        if self.data_source not in DATA_SOURCES:
            raise ValueError(f"unknown data_source {self.data_source!r}; allowed: {', '.join(DATA_SOURCES)}")
        if not 0 < self.test_share <= 1 - 2 * VAL_SHARE:
            raise ValueError(f"test_share must be in (0, {1 - 2 * VAL_SHARE:g}], got {self.test_share}")
        if not 1 <= self.n_templates <= len(TEMPLATES):
            raise ValueError(f"n_templates must be in [1, {len(TEMPLATES)}], got {self.n_templates}")
        if not 1 <= self.operand_min <= self.operand_max or 2 * self.operand_max > MAX_SUM:
            raise ValueError(f"operands must satisfy 1 <= min <= max <= 50, got [{self.operand_min}, {self.operand_max}]")
