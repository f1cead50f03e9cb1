"""The routing page's figures: where the routers send each domain, digit and token."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from .plots import COLUMN_IN, PALETTE, accuracy_heatmap, check


def routing_heatmaps(tables: dict[str, pd.DataFrame], title: str, label: str | None = None):
    """One annotated [0, 1] heatmap per table (rows: domains or digits, columns: experts), side by side; each colour
    bar names its own panel's quantity (the panel's title) unless `label` names one for all."""
    cols = min(2, len(tables))  # at most two panels a row: a figure at the column's width
    rows = math.ceil(len(tables) / cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(COLUMN_IN, rows * (0.36 * max(len(t) for t in tables.values()) + 1.9)))
    for ax, (name, table) in zip(axes.flat, tables.items()):
        accuracy_heatmap(table, name, ax=ax, label=label or name)
        ax.set(xlabel="expert")
        ax.tick_params(axis="y", rotation=0)
    for ax in list(axes.flat)[len(tables):]:
        ax.set_axis_off()
    fig.suptitle(title, fontweight="bold")
    fig.tight_layout()
    return check(fig)


def token_routes(samples: dict[str, pd.DataFrame], n_experts: int, per_line: int = 10):
    """Each sample's tokens in boxes coloured by their top expert (columns token, top expert, weight), one block a sample."""
    colours = sns.color_palette(PALETTE, n_experts)
    lines = [(name, part) for name, df in samples.items()
             for part in [df.iloc[i:i + per_line] for i in range(0, len(df), per_line)]]
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 0.6 * len(lines) + 0.9))
    ax.set_axis_off()
    ax.set(xlim=(0, per_line + 1.6), ylim=(len(lines), -0.8))
    shown = set()
    for row, (name, part) in enumerate(lines):
        if name not in shown:
            ax.text(0, row, name, va="center", fontsize=9, fontweight="bold")
            shown.add(name)
        for col, (tok, e, w) in enumerate(zip(part["token"], part["top expert"], part["weight"])):
            ax.text(1.6 + col, row, f"{tok}\n{w:.2f}", ha="left", va="center", fontsize=9,
                    bbox={"facecolor": colours[int(e)], "alpha": 0.45, "edgecolor": "none", "boxstyle": "round,pad=0.25"})
    for e in range(n_experts):
        ax.text(1.6 + 1.6 * e, -0.6, f"expert {e}", fontsize=9, va="center",
                bbox={"facecolor": colours[e], "alpha": 0.45, "edgecolor": "none"})
    fig.tight_layout()
    return check(fig)
