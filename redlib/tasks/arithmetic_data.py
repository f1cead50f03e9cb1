"""Task 1's sample frames, drawn as a `Task1Spec` says (`arithmetic.py` holds the definitions), and the JSONL export."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..core.runtime import generator
from .arithmetic import MIN_SUM, RELEASED_MAX_SUM, TEMPLATES, VAL_SHARE, Task1Spec, format_numbers, label_of, range_of


def _frame(a: np.ndarray, b: np.ndarray, t: np.ndarray, number_format: str) -> pd.DataFrame:
    s = a + b
    text = [format_numbers(TEMPLATES[ti].format(a=ai, b=bi), number_format)
            for ai, bi, ti in zip(a.tolist(), b.tolist(), t.tolist())]
    return pd.DataFrame({"a": a, "b": b, "template": t, "text": text, "sum": s, "label": label_of(s), "range": range_of(s)})


def question_pool(spec: Task1Spec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every distinct operand pair (a, b) the source can produce and the probability it draws each one."""
    if spec.data_source == "text":  # a, b uniform: every pair equally likely
        ops = torch.arange(spec.operand_min, spec.operand_max + 1)
        a, b = (t.flatten() for t in torch.meshgrid(ops, ops, indexing="ij"))
        return a, b, torch.full((len(a),), 1 / len(a), dtype=torch.float64)
    sums = torch.arange(MIN_SUM, RELEASED_MAX_SUM + 1)  # released: s uniform, then a uniform in [0, s]
    s = torch.repeat_interleave(sums, sums + 1)
    a = torch.cat([torch.arange(v + 1) for v in sums.tolist()])
    return a, s - a, 1 / (len(sums) * (s + 1).double())


def make_task1(spec: Task1Spec) -> dict[str, pd.DataFrame]:
    """Train/val/test frames with columns a, b, template, text, sum, label (sum - 2), range (0-4)."""
    gen = generator(spec.seed)
    pa, pb, weight = question_pool(spec)
    n = {"train": spec.n_train, "val": spec.n_val, "test": spec.n_test}
    if spec.split == "pairs":
        perm = torch.randperm(len(pa), generator=gen)
        n_test, n_val = round(spec.test_share * len(perm)), round(VAL_SHARE * len(perm))
        pools = {"test": perm[:n_test], "val": perm[n_test:n_test + n_val], "train": perm[n_test + n_val:]}
        picks = {k: pools[k][torch.multinomial(weight[pools[k]], n[k], replacement=True, generator=gen)]
                 for k in ("train", "val", "test")}
    else:
        idx = torch.multinomial(weight, sum(n.values()), replacement=True, generator=gen)
        picks = {"train": idx[: n["train"]], "val": idx[n["train"]: n["train"] + n["val"]], "test": idx[n["train"] + n["val"]:]}
    out = {}
    for k, p in picks.items():
        t = torch.randint(spec.n_templates, (len(p),), generator=gen)
        out[k] = _frame(pa[p].numpy(), pb[p].numpy(), t.numpy(), spec.number_format)
    return out


def to_jsonl(df: pd.DataFrame, path: str | Path) -> Path:
    """Write one JSON object per sample: question, answer, operands, range label."""
    path = Path(path)
    with path.open("w") as f:
        for r in df.itertuples(index=False):
            f.write(json.dumps({"question": r.text, "answer": int(r.sum), "a": int(r.a), "b": int(r.b),
                                "range": f"R{int(r.range) + 1}"}) + "\n")
    return path
