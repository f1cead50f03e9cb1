"""Metrics on predicted labels (scikit-learn underneath, imported when first used: the CLI validates input without
it) and summaries over seeds."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def accuracy(y_true, y_pred) -> float:
    """Fraction of exact matches."""
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(np.asarray(y_true), np.asarray(y_pred)))


def macro_f1(y_true, y_pred, labels: Sequence | None = None) -> float:
    """Unweighted mean of per-class F1 (classes absent from both sides are skipped unless `labels` names them)."""
    from sklearn.metrics import f1_score

    return float(f1_score(np.asarray(y_true), np.asarray(y_pred), labels=labels, average="macro", zero_division=0))


def wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% by default) of a proportion p observed over n independent units."""
    if n == 0:
        return float("nan"), float("nan")
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(centre - half), float(centre + half)


def per_group(y_true, y_pred, groups, names: dict | None = None, y_value=None) -> pd.DataFrame:
    """Accuracy, mean absolute error (of `y_value` if given, else of the labels) and count per group."""
    from sklearn.metrics import mean_absolute_error

    y_true, y_pred, groups = np.asarray(y_true), np.asarray(y_pred), np.asarray(groups)
    y_value = np.asarray(y_pred if y_value is None else y_value)
    rows = []
    for g in sorted(set(groups.tolist())):
        sel = groups == g
        rows.append({"group": (names or {}).get(g, g), "accuracy": accuracy(y_true[sel], y_pred[sel]),
                     "mae": float(mean_absolute_error(y_true[sel], y_value[sel])), "n": int(sel.sum())})
    return pd.DataFrame(rows)


def confusion(y_true, y_pred, labels: Sequence) -> pd.DataFrame:
    """Confusion matrix as a DataFrame (rows: truth, columns: prediction)."""
    from sklearn.metrics import confusion_matrix

    m = confusion_matrix(np.asarray(y_true), np.asarray(y_pred), labels=list(labels))
    return pd.DataFrame(m, index=pd.Index(labels, name="true"), columns=pd.Index(labels, name="predicted"))


def confusion_table(matrices: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Confusion matrices (title -> truth x prediction counts, the same labels on both axes) as one long table of
    their cells that count something and their diagonal (so every label stays): title, true, predicted, count."""
    cells = pd.concat([m.stack().rename("count").reset_index().assign(title=name) for name, m in matrices.items()],
                      ignore_index=True)
    return cells[(cells["count"] > 0) | (cells["true"] == cells["predicted"])][["title", "true", "predicted", "count"]]


def confusion_matrices(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """`confusion_table`'s matrices back, by title, in the table's order."""
    return {name: part.pivot(index="true", columns="predicted", values="count").fillna(0).astype(int)
            for name, part in table.groupby("title", sort=False)}
