"""The house style and the recurring figures (prediction curves, accuracy heatmaps, per-domain bars)."""

from __future__ import annotations

import hashlib
import html
import math

import matplotlib.pyplot as plt
from matplotlib import transforms
import numpy as np
import pandas as pd
import seaborn as sns

from ..core.claims import rate, small, unbroken
from .legible import COLUMN_IN, check
from .words import relabel

PALETTE = "colorblind"


def set_style() -> None:
    """One look for every figure of the book."""
    sns.set_theme(style="whitegrid", context="notebook", palette=PALETTE)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "axes.titleweight": "bold", "figure.autolayout": False})


LEGEND_PT = 9  # every legend of the book: at least 9 pt, outside the data

MIN_SPAN = 2.0  # the smallest y range a prediction plot shows, in sum units: differences below it are float noise


def prediction_curves(df: pd.DataFrame, title: str, bands: list[tuple[int, int]] | None = None):
    """Predicted vs true sum along each line of `df` (columns line, a, model, prediction, truth); one panel a line."""
    lines = list(dict.fromkeys(df["line"]))
    fig, axes = plt.subplots(1, len(lines), figsize=(COLUMN_IN, 3.6), sharex=True)
    for ax, line in zip(axes if len(lines) > 1 else [axes], lines):
        part = df[df["line"] == line]
        for lo, hi in bands or []:
            ax.axvspan(lo - 0.5, hi + 0.5, color="0.92", zorder=0)
        sns.lineplot(part, x="a", y="prediction", hue="model", ax=ax, linewidth=1.3)
        truth = part.drop_duplicates("a")
        ax.plot(truth["a"], truth["truth"], "k--", linewidth=1.5, label="truth")
        ax.set(title=line, xlabel="a", ylabel="predicted sum a + b" if ax is axes[0] or len(lines) == 1 else "")
        lo, hi = ax.get_ylim()
        if hi - lo < MIN_SPAN:  # predictions equal to float precision: pin the axis instead of drawing the noise
            mid = (hi + lo) / 2
            ax.set_ylim(mid - MIN_SPAN / 2, mid + MIN_SPAN / 2)
        ax.get_legend().remove()
    handles, labels = ax.get_legend_handles_labels()
    fig.suptitle(title)
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=4, fontsize=LEGEND_PT, frameon=False)
    return check(fig)


def accuracy_heatmap(table: pd.DataFrame, title: str, ax=None, fmt: str = ".2f", label: str = "accuracy"):
    """Annotated heatmap of values in [0, 1], accuracies by default (rows: models, columns: domains)."""
    table = relabel(table)
    alone = ax is None
    if alone:
        _, ax = plt.subplots(figsize=(min(COLUMN_IN, 1.05 * table.shape[1] + 3), 0.42 * table.shape[0] + 1.4))
    sns.heatmap(table, annot=True, fmt=fmt, vmin=0, vmax=1, cmap="viridis", cbar_kws={"label": label}, ax=ax)
    ax.set(title=title, xlabel="", ylabel="")
    ax.figure.tight_layout()
    return check(ax.figure) if alone else ax.figure


def heatmaps_unless_same(tables: dict[str, pd.DataFrame], title: str, same_within: float = 0.05):
    """Annotated [0, 1] heatmaps of tables with the same rows and columns, one above the other; where every cell of
    the later tables lies within `same_within` of the first's, only the first is drawn and its title says so (two
    panels that show one result twice are one panel and a sentence)."""
    names = list(tables)
    first = tables[names[0]]
    gap = max((float((t - first).abs().max().max()) for t in list(tables.values())[1:]), default=0.0)
    shown = names if gap > same_within else names[:1]
    rows = first.shape[0]
    fig, axes = plt.subplots(len(shown), 1, figsize=(min(COLUMN_IN, 1.05 * first.shape[1] + 3),
                                                     len(shown) * (0.42 * rows + 1.1) + 0.3), squeeze=False)
    for ax, name in zip(axes[:, 0], shown):
        accuracy_heatmap(tables[name], name, ax=ax)
    if len(shown) < len(names):
        alike = "the same in every cell" if gap == 0 else f"every cell within {max(gap, 0.005):.3f}"  # never "0.00"
        axes[0, 0].set_title(f"{names[0]} ({', '.join(names[1:])}: {alike})")
    fig.suptitle(title, fontweight="bold")
    fig.tight_layout()
    return check(fig)


def legend_outside(ax, entries: int, title: str, right: bool = False) -> None:
    """The axes' legend off the data, below it (or `right` of it), none for a single entry, which the title names."""
    if entries > 1 and right:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.0, 1.0), fontsize=LEGEND_PT, title=title, frameon=False)
    elif entries > 1:
        longest = max(len(t.get_text()) for t in ax.get_legend().get_texts())
        per_row = max(1, min(entries, 5, int(COLUMN_IN * 72 / (0.6 * LEGEND_PT * longest + 30))))  # fits the column
        ax.get_legend().set_visible(False)  # the space under the axes is its tick labels and axis label alone
        renderer = ax.figure.canvas.get_renderer()
        under = (ax.bbox.y0 - ax.get_tightbbox(renderer).y0) * 72 / ax.figure.dpi + 4  # points, whatever the layout
        sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, 0.0), ncols=per_row, fontsize=LEGEND_PT,
                        title=title, frameon=False,
                        bbox_transform=transforms.offset_copy(ax.transAxes, ax.figure, y=-under, units="points"))
    elif ax.get_legend():
        ax.get_legend().remove()


def domain_bars(df: pd.DataFrame, x: str, y: str, hue: str, title: str, ylabel: str = "accuracy"):
    """Per-domain bars with seed spread as error bars (one row per seed in `df`)."""
    df = relabel(df)
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 3.6))
    sns.barplot(df, x=x, y=y, hue=hue, errorbar="sd", ax=ax)
    ax.set(title=title, xlabel="", ylabel=ylabel)
    legend_outside(ax, df[hue].nunique(), hue)
    fig.tight_layout()
    return check(fig)


def method_bars(overall: pd.DataFrame, title: str):
    """Test accuracy per method and setting (`run`; one row per seed in `overall`): the mean as a dot, sd over seeds as
    error bars, the axis from just below the lowest (dots, not bars, so that a shortened axis misleads nobody); the
    methods down the side, so that their names read level and never run into each other."""
    overall = relabel(overall)
    methods, settings = overall["method"].nunique(), overall["run"].nunique()
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 1.3 + methods * (0.16 + 0.08 * settings)))
    sns.pointplot(overall, y="method", x="accuracy", hue="run", errorbar="sd", orient="h", dodge=0.4 * (settings > 1),
                  linestyle="none", capsize=0.15, ax=ax)
    low = overall.groupby(["method", "run"])["accuracy"].agg(lambda a: a.mean() - (a.std() if len(a) > 1 else 0)).min()
    ax.set(ylabel="", xlabel="test accuracy", xlim=(max(0.0, np.floor(20 * low - 0.5) / 20), 1.005), title=title)
    legend_outside(ax, settings, "setting")
    if settings == 1:  # one setting: the title names it
        ax.set_title(f"{title} ({overall['run'].iloc[0]})")
    fig.tight_layout()
    return check(fig)


def step_lines(df: pd.DataFrame, x: str, hue: str, title: str, col: str | None = None):
    """Accuracy against a count (steps, operations) per `hue`, one row per seed in `df`, sd over seeds as error bars;
    panels (`col`) that hold the same numbers are drawn once, the title naming them all."""
    df = relabel(df)
    if col and df[col].nunique() > 1 and same_panels(df, col, [x, hue, "seed"], "accuracy"):
        title = f"{title}; {' and '.join(map(str, dict.fromkeys(df[col])))} alike"
        df, col = df[df[col] == df[col].iloc[0]], None
    wrap = 2 if col and df[col].nunique() > 2 else None  # at most two panels a row: a figure at book width
    grid = sns.catplot(df, x=x, y="accuracy", hue=hue, col=col, col_wrap=wrap, kind="point", errorbar="sd",
                       dodge=0.3, height=2.8, aspect=1.15 if col else 2.2, capsize=0.1, legend_out=False)
    grid.set(ylim=(0, 1.02))
    if col:
        grid.set_titles("{col_name}")
    grid.set_axis_labels(x, "final-answer accuracy")
    grid.figure.suptitle(title, fontweight="bold")
    grid.figure.tight_layout()
    legend_below(grid, most=4)
    return check(grid.figure)


def same_panels(df: pd.DataFrame, col: str, keys: list[str], value: str) -> bool:
    """Whether every panel (`col`) of `df` holds the same `value` for the same `keys`, exactly."""
    keys = [k for k in keys if k in df.columns]
    panels = [part.set_index(keys)[value].sort_index() for _, part in df.groupby(col, sort=False)]
    return all(p.index.equals(panels[0].index) and (p.to_numpy() == panels[0].to_numpy()).all() for p in panels[1:])


def confusions(matrices: dict[str, pd.DataFrame], xlabel: str, ylabel: str, every: int = 10, title: str = ""):
    """Confusion matrices side by side, one panel per title (`title` above them all); a tick label every `every`
    classes."""
    fig, axes = plt.subplots(1, len(matrices), figsize=(COLUMN_IN, COLUMN_IN / len(matrices) + 0.4), squeeze=False)
    for ax, (name, cm) in zip(axes[0], matrices.items()):
        sns.heatmap(cm, cmap="magma_r", ax=ax, cbar=False, xticklabels=every, yticklabels=every)
        ax.set(title=name, xlabel=xlabel, ylabel=ylabel)
    if title:
        fig.suptitle(title, fontweight="bold")
    fig.tight_layout()
    return check(fig)


def speedup_vs_bound(df: pd.DataFrame, title: str):
    """Measured speed-up (min-max as error bars) and the (L + 2k) / 3k bound against depth L, one line per batch size."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    depths = sorted(df["blocks"].unique())
    ax.plot(depths, [df.loc[df["blocks"] == d, "bound"].iloc[0] for d in depths], "k--", label="bound (L+2k)/3k")
    for batch, part in df.sort_values("blocks").groupby("batch"):
        err = [part["speedup"] - part["speedup_min"], part["speedup_max"] - part["speedup"]]
        ax.errorbar(part["blocks"], part["speedup"], yerr=err, marker="o", capsize=3, label=f"measured, batch {batch}")
    ax.set(title=title, xlabel="blocks L (top k = 2 trained)", ylabel="speed-up (naive / cached)", xticks=depths)
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=LEGEND_PT, frameon=False)
    fig.tight_layout()
    return check(fig)


def number(x, digits: int = 3) -> str:
    """A number for people: integers as integers (with thousands separators), others to `digits` significant
    digits without exponent between 0.001 and 10^digits, and '-' for a missing value."""
    if x is None or (isinstance(x, (float, np.floating)) and math.isnan(x)):
        return "-"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        return str(x)
    if isinstance(x, (int, np.integer)) or abs(x) >= 10**digits:
        return f"{round(float(x)):,}"
    if x == 0:
        return "0"
    if abs(x) < 1e-3:
        return unbroken(f"{x:.{max(digits - 1, 0)}e}")
    decimals = max(digits - 1 - math.floor(math.log10(abs(x))), 0)
    return f"{x:.{decimals}f}"


def mean_sd(df: pd.DataFrame, by: list[str], values: list[str], decimals: int = 3, seed_col: str = "seed") -> pd.DataFrame:
    """'mean ± sd' over seeds of each value column per `by` group, both to `decimals` places, and the seed count: one
    readable column per quantity instead of four (mean, std, min, max)."""
    g = df.groupby(by, sort=False)
    mean, sd = g[values].mean(), g[values].std(ddof=1)
    out = pd.DataFrame({v: [f"{m:.{decimals}f}" + ("" if s != s else f" ± {small(s, decimals)}") for m, s in
                            zip(mean[v], sd[v])] for v in values}, index=mean.index)
    return out.assign(seeds=g[seed_col].nunique())


def styled(df: pd.DataFrame, *, caption: str, precision: int = 3, hide_index: bool = False):
    """A pandas Styler with a caption (every table in the book has one), the house number format (`number`,
    `precision` significant digits), its labels in reader words (`words.relabel`) and a stable id (so
    re-executions give identical HTML)."""
    df = relabel(df)
    uid = hashlib.md5((caption or "").encode() + df.to_csv().encode()).hexdigest()[:8]
    # counts stored as floats (a column with a missing value, or whole numbers beyond 1): integers; whole numbers
    # within [-1, 1] and nothing missing are shares (a domain every method gets right: "1.000", not "1")
    counts = [c for c in df.columns if pd.api.types.is_float_dtype(df[c]) and len(df[c].dropna())
              and (df[c].dropna() % 1 == 0).all() and (df[c].isna().any() or df[c].abs().gt(1).any())]
    # shares and accuracies (a float column within [-1, 1]): one decimal convention, `precision` places ("1.000" and
    # "0.999", never "1.00" beside them); a non-zero that rounds to zero says so ("< 5e-4")
    rates = [c for c in df.columns if str(c) == "lr" or str(c).endswith((" lr", "learning rate"))]  # "1e-4", not "< 5e-4"
    unit = [c for c in df.columns if c not in counts and c not in rates and pd.api.types.is_float_dtype(df[c])
            and len(df[c].dropna()) and df[c].dropna().abs().le(1).all()]
    sty = df.style.format(lambda x: html.escape(number(x, precision)), na_rep="-")  # "<profile>" is text, not a tag
    if counts:
        sty = sty.format(lambda x: number(int(x), precision) if x == x else "-", subset=counts)
    if unit:
        sty = sty.format(lambda x: html.escape(small(x, precision)) if x == x else "-", subset=unit)
    if rates:
        sty = sty.format(lambda x: rate(x) if x == x else "-", subset=rates)
    for axis in ("index", "columns"):
        sty = sty.format_index(header, axis=axis)
    sty = sty.set_uuid(f"t{uid}").set_caption(caption)
    return sty.hide(axis="index") if hide_index else sty


def behind_click(sty, summary: str):
    """A styled table behind a click: a closed `<details>` whose summary line says what it holds."""
    from IPython.display import HTML

    return HTML(f"<details><summary>{html.escape(summary)}</summary>{sty.to_html()}</details>")


def main_and_rest(df: pd.DataFrame, main: str, caption: str, rest: str, precision: int = 3) -> None:
    """Show a table's rows under `main` (its first index level: the claims' setting); the other rows (extensions)
    behind a click, captioned `rest`."""
    from IPython.display import display

    display(styled(df.loc[[main]], precision=precision, caption=caption))
    others = df.drop(index=main, level=0)
    if len(others):
        display(behind_click(styled(others, precision=precision, caption=rest), rest))


def header(label) -> str:
    """A header or row name as HTML: escaped, with a break opportunity after each underscore, so a snake_case name
    wraps between its words and never inside one (the book's CSS breaks headers only there and at spaces)."""
    return html.escape(str(label)).replace("_", "_<wbr>")


def perturbation_curves(sweep: pd.DataFrame, title: str):
    """Accuracy against strength per method, one panel per perturbation (columns) and task (rows), sd over seeds."""
    sweep = relabel(sweep)
    data = sweep[sweep["perturbation"] != "none"]
    data = data.assign(panel=data["task"].astype(str) + ": " + data["perturbation"].astype(str))
    data = data.assign(method=data["method"].map(hidden_under(data, ["panel", "strength"], "method", "accuracy")))
    grid = sns.relplot(data, x="strength", y="accuracy", hue="method", style="method", col="panel", col_wrap=2,
                       kind="line", errorbar="sd", markers=True, dashes=False, height=2.3, aspect=1.55,
                       facet_kws={"sharex": False, "legend_out": False})
    grid.set(ylim=(0, 1.02))
    grid.set_titles("{col_name}", size=10)
    grid.figure.suptitle(title, fontweight="bold")
    grid.figure.tight_layout()
    legend_below(grid, most=2)
    return check(grid.figure)


def legend_below(grid: sns.FacetGrid, most: int) -> None:
    """The grid's legend centred below its panels (off the data and the titles), in as many columns as fit within
    the panels' width and the book's column (at most `most`): long labels stack into rows instead of widening the
    figure, which would shrink its text on the page. (Made with `legend_out=False`, so that seaborn has not widened
    the figure for a legend on the right.)"""
    fig = grid.figure
    room = min(fig.get_figwidth(), COLUMN_IN) * fig.dpi
    renderer = fig.canvas.get_renderer()
    for ncol in range(most, 0, -1):
        sns.move_legend(grid, "upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol, frameon=False, fontsize=LEGEND_PT)
        if grid.legend.get_window_extent(renderer).width <= room:
            return


def hidden_under(df: pd.DataFrame, at: list[str], line: str, value: str, within: float = 0.005) -> dict[str, str]:
    """Each line's legend label: its name, or, where its mean `value` lies within `within` of a later line's at every
    point (`at`; lines are drawn in order, so the later one is on top), its name and the last line drawn over it, so a
    reader knows why it cannot be seen."""
    means = df.groupby([line, *at], sort=False)[value].mean()
    names = list(dict.fromkeys(df[line]))
    labels = {name: name for name in names}
    for i, name in enumerate(names):  # a line drawn later lies on top of an earlier one with the same values
        over = [o for o in names[i + 1:] if means[name].index.equals(means[o].index)
                and float((means[name] - means[o]).abs().max()) <= within]
        if over:
            labels[name] = f"{name} (under {over[-1]})"
    return labels


def change_heatmaps(df: pd.DataFrame, title: str):
    """Accuracy change (expert touched x domain, mean over seeds) per task (rows) and method (columns), centred at 0."""
    tasks, names = list(dict.fromkeys(df["task"])), list(dict.fromkeys(df["method"]))
    fig, axes = plt.subplots(len(tasks), len(names), figsize=(COLUMN_IN, 3.0 * len(tasks) + 0.4), squeeze=False)
    for r, task in enumerate(tasks):
        for c, name in enumerate(names):
            part = df[(df["task"] == task) & (df["method"] == name)]
            table = part.pivot_table(index="expert", columns="domain", values="change", sort=False)
            sns.heatmap(table, annot=change_labels(table), fmt="", center=0, vmin=-1, vmax=1, cmap="RdBu", cbar=False,
                        ax=axes[r][c], annot_kws={"size": 9})
            axes[r][c].set(title=f"{task}: {name}", xlabel="domain", ylabel="expert")
            if (table.abs() < 0.005).all().all():  # a blank panel is a finding: say it in the panel
                axes[r][c].text(0.5, 0.5, "no change in any cell", transform=axes[r][c].transAxes, ha="center",
                                va="center", fontsize=10, bbox={"facecolor": "white", "edgecolor": "0.7"})
    fig.suptitle(f"{title} (blank: no change to 2 decimals)", fontweight="bold")
    fig.tight_layout()
    return check(fig)


def change_labels(table: pd.DataFrame) -> np.ndarray:
    """A change heatmap's cell labels: the change to 2 decimals, blank where it rounds to zero (no "0.00" wall)."""
    return np.vectorize(lambda v: "" if not np.isfinite(v) or abs(v) < 0.005 else f"{v:+.2f}")(table.to_numpy())


def training_tables(t: dict[str, pd.DataFrame], by: tuple[str, ...] = ("run", "stage")) -> None:
    """Show a page's epochs table (cap, patience, runs still improving at the cap) and its seconds per stage kind,
    per setting when `by` starts with the setting (`run`), mean over seeds."""
    from IPython.display import display

    from ..experiments.range_tables import FAR_FACTOR, FAR_MARGIN, epochs_table, stage1_seeds

    first = t["epochs"]["run"].iloc[0] if "run" in t["epochs"] else None  # the claims' setting comes first
    display(styled(stage1_seeds(t["epochs"], first), precision=4, hide_index=True,
                   caption=f"Stage 1 of every seed{f' ({first})' if first else ''}: a seed whose validation loss lies "
                   f"above {FAR_FACTOR} x the seeds' median + {FAR_MARGIN} stopped far from the others"))
    per = " per setting and stage" if "run" in by else " per stage"
    display(styled(epochs_table(t["epochs"], by), precision=1, caption=f"Epochs run and best epoch (mean over seeds)"
                   f"{per}, the cap and patience, and the runs still improving at the cap"))
    seconds = t["stage_seconds"]
    seconds = (seconds.groupby("run", sort=False).mean(numeric_only=True).drop(columns="seed") if "run" in by
               else seconds.mean(numeric_only=True).drop("seed").to_frame("seconds"))
    display(styled(seconds, precision=1, caption=f"Seconds{per}, mean over seeds"))
