"""Arithmetic Task 1 (addition): questions, answer classes 2..100, output ranges R1-R5, splits, JSONL export.

Only (hi - lo + 1)^2 distinct operand pairs exist (2,500 for [1, 50]), so a dataset of tens of thousands
of samples repeats pairs. `split="pairs"` divides the distinct pairs 8:1:1 (no pair in two splits: test
measures generalisation); `split="iid"` samples as the paper does, so the same question can be in train
and test (test measures recall).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.runtime import generator

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


def range_of(s) -> np.ndarray:
    """Range index 0-4 (R1..R5) of each sum."""
    s = np.asarray(s)
    return np.clip(np.searchsorted([hi for _, hi in RANGES], s, side="left"), 0, len(RANGES) - 1)


def label_of(s) -> np.ndarray:
    """Class index of each sum (sum - 2)."""
    return np.asarray(s) - MIN_SUM


@dataclass(frozen=True)
class Task1Spec:
    """What determines a Task 1 dataset: operand range, templates, sizes, split kind and seed."""

    operand_min: int = 1
    operand_max: int = 50
    n_templates: int = 1
    n_train: int = 64_000
    n_val: int = 8_000
    n_test: int = 8_000
    split: str = "pairs"
    seed: int = 0

    def __post_init__(self):
        if self.split not in SPLITS:
            raise ValueError(f"unknown split {self.split!r}; allowed: {', '.join(SPLITS)}")
        if not 1 <= self.n_templates <= len(TEMPLATES):
            raise ValueError(f"n_templates must be in [1, {len(TEMPLATES)}], got {self.n_templates}")
        if not 1 <= self.operand_min <= self.operand_max or 2 * self.operand_max > MAX_SUM:
            raise ValueError(f"operands must satisfy 1 <= min <= max <= 50, got [{self.operand_min}, {self.operand_max}]")


def _frame(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> pd.DataFrame:
    s = a + b
    text = [TEMPLATES[ti].format(a=ai, b=bi) for ai, bi, ti in zip(a.tolist(), b.tolist(), t.tolist())]
    return pd.DataFrame({"a": a, "b": b, "template": t, "text": text, "sum": s, "label": label_of(s), "range": range_of(s)})


def make_task1(spec: Task1Spec) -> dict[str, pd.DataFrame]:
    """Train/val/test frames with columns a, b, template, text, sum, label (sum - 2), range (0-4)."""
    gen = generator(spec.seed)
    ops = torch.arange(spec.operand_min, spec.operand_max + 1)
    pa, pb = (t.flatten() for t in torch.meshgrid(ops, ops, indexing="ij"))
    n = {"train": spec.n_train, "val": spec.n_val, "test": spec.n_test}
    if spec.split == "pairs":
        perm = torch.randperm(len(pa), generator=gen)
        n_val = n_test = len(perm) // 10
        pools = {"test": perm[:n_test], "val": perm[n_test:n_test + n_val], "train": perm[n_test + n_val:]}
        picks = {k: pools[k][torch.randint(len(pools[k]), (n[k],), generator=gen)] for k in ("train", "val", "test")}
    else:
        idx = torch.randint(len(pa), (sum(n.values()),), generator=gen)
        picks = {"train": idx[: n["train"]], "val": idx[n["train"]: n["train"] + n["val"]], "test": idx[n["train"] + n["val"]:]}
    out = {}
    for k, p in picks.items():
        t = torch.randint(spec.n_templates, (len(p),), generator=gen)
        out[k] = _frame(pa[p].numpy(), pb[p].numpy(), t.numpy())
    return out


def to_jsonl(df: pd.DataFrame, path: str | Path) -> Path:
    """Write one JSON object per sample: question, answer, operands, range label."""
    path = Path(path)
    with path.open("w") as f:
        for r in df.itertuples(index=False):
            f.write(json.dumps({"question": r.text, "answer": int(r.sum), "a": int(r.a), "b": int(r.b),
                                "range": f"R{int(r.range) + 1}"}) + "\n")
    return path
