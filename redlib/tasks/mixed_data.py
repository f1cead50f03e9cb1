"""Task 2's sample frames, drawn as a `Task2Spec` says (`mixed.py` holds the definitions), and every single step the
op experts can be asked."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .arithmetic import MAX_SUM, MIN_SUM, format_numbers, label_of, range_of
from .mixed import OPERAND_MAX, OPERAND_MIN, OPS, PHRASINGS, Task2Spec, evaluate, parse_mix, phrase, program_text, sample_chain


def _records(spec: Task2Spec, n: int, rng: np.random.Generator) -> pd.DataFrame:
    mix = parse_mix(spec.step_mix)
    steps = rng.choice(list(mix), n, p=list(mix.values()))
    phrasings = rng.integers(0, spec.n_phrasings, n)
    rows = []
    for k, p in zip(steps.tolist(), phrasings.tolist()):
        operands, ops = sample_chain(rng, k)
        text, slots = phrase(operands, ops, PHRASINGS[p])
        answer = evaluate(operands, ops)[-1]
        rows.append({"text": format_numbers(text, spec.number_format), "answer": answer, "steps": k,
                     "phrasing": PHRASINGS[p], "ops": ops, "operands": operands, "slots": slots,
                     "form": str(operands[0]) + "".join(f"{op}{o}" for op, o in zip(ops, operands[1:])),
                     "program": program_text(operands, ops)})
    df = pd.DataFrame(rows)
    return df.assign(label=label_of(df["answer"]), range=range_of(df["answer"]))


def make_task2(spec: Task2Spec) -> dict[str, pd.DataFrame]:
    """Train/val/test frames: text, answer, label (answer - 2), range (0-4), steps, phrasing, ops, operands, slots,
    form, program. `iid` cuts one sampled stream (the paper's protocol); `isolated` gives each symbolic form to one split.
    """
    rng = np.random.default_rng(spec.seed)
    sizes = {"train": spec.n_train, "val": spec.n_val, "test": spec.n_test}
    df = _records(spec, sum(sizes.values()), rng)
    if spec.split == "iid":
        cut = np.cumsum([0, *sizes.values()])
        return {k: df.iloc[cut[i]:cut[i + 1]].reset_index(drop=True) for i, k in enumerate(sizes)}
    forms = rng.permutation(np.asarray(df["form"].unique(), dtype=object))
    counts = df["form"].value_counts()[forms].to_numpy()
    # forms in shuffled order fill test, then val, each up to its share of samples; the rest is train
    ends = np.cumsum(counts)
    part = np.where(ends <= spec.n_test, "test", np.where(ends <= spec.n_test + spec.n_val, "val", "train"))
    where = dict(zip(forms, part))
    return {k: df[df["form"].map(where) == k].reset_index(drop=True) for k in sizes}


def step_pairs() -> pd.DataFrame:
    """Every single step the programs can produce: left in [2, 100] (an operand or an intermediate), right in [2, 50],
    result in [2, 100]; columns left, right, op, result."""
    rows = [(left, right, op, left + right if op == "+" else left - right)
            for op in OPS for left in range(MIN_SUM, MAX_SUM + 1) for right in range(OPERAND_MIN, OPERAND_MAX + 1)]
    df = pd.DataFrame(rows, columns=["left", "right", "op", "result"])
    return df[df["result"].between(MIN_SUM, MAX_SUM)].reset_index(drop=True)
