"""Reader words for the labels the code and the result files use: what a table, a legend or the ledger shows.

The result files keep the code's labels (`macro_f1`, `RED stage 4`, `pairs, digits`, the claims file's `task1_drop`):
they are the data of record and the keys other code reads. Only what a reader sees goes through `reader` and
`relabel`, so a page says "macro F1" and "unseen pairs, digit-spaced numbers" without a result file changing.
"""

from __future__ import annotations

import pandas as pd

from ..configs.ranges import setting_words

# exact labels -> reader words (a label not here is shown as it is, its setting's words aside: `setting_words`)
READER = {
    "macro_f1": "macro F1",
    "boundary_accuracy": "accuracy on boundary sums",
    "RED stage 4": "RED, tuned jointly (stage 4)",
    "task1_drop": "Task 1 drop",
    "task2_drop": "Task 2 drop",
    "total_hours": "total hours",
    "base_hours": "backbone hours",
    "experts_minutes": "experts, minutes",
    "router_red_hours": "router and RED, hours",
    "std": "sd",
    "split_part": "split",
}


def reader(label: object) -> object:
    """A label in reader words (a label that is not a string is returned as it is)."""
    if not isinstance(label, str):
        return label
    if label in READER:
        return READER[label]
    name, _, stat = label.rpartition(" ")
    if stat in ("mean", "sd", "std") and name:  # a summary column: "macro_f1 std" reads "macro F1 sd"
        return f"{reader(name)} {READER.get(stat, stat)}"
    return setting_words(label)


def relabel(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` whose column names, index names and labels, and text cells read in reader words; numbers are
    untouched."""
    out = df.rename(columns=reader, index=reader)
    out.columns = out.columns.set_names([reader(n) for n in out.columns.names])
    out.index = out.index.set_names([reader(n) for n in out.index.names])
    for i in range(out.shape[1]):
        col = out.iloc[:, i]
        if col.dtype == object or pd.api.types.is_string_dtype(col):
            out.isetitem(i, col.map(reader))
    return out
