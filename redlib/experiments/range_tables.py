"""What the range pages (Task 1, Task 2, the step decomposition) show from their result tables: summaries over
seeds beside the paper's, per-range tables, near misses, the stage-1 extension in words, and verdict tallies; and
the epochs against their caps, which every RED page shows (MNIST's too).

Everything here reads tables a run wrote (`ranges.evaluate`); nothing trains.
"""

from __future__ import annotations

import pandas as pd

from ..core.claims import CEILING, load_claims
from ..core.settings import still_improving
from ..red.methods import TIES
from .ranges import NEAR, PAPER_KEYS


def verdict_tally(v: dict[str, str]) -> str:
    """How many claims got each verdict, in words: "7 holds, 2 partly, 11 does not hold" -> "verdicts: ..."."""
    return "verdicts: " + ", ".join(f"{k} {n}" for k, n in pd.Series(v).value_counts().items())


def near_miss_words(overall: pd.DataFrame, method: str) -> str:
    """One method's share of errors within ±NEAR per setting, in words ("no errors" where it made none)."""
    near = overall[overall["method"] == method].groupby("run", sort=False)[f"errors within ±{NEAR}"].mean()
    return ", ".join(f"{r} {'no errors' if pd.isna(x) else f'{x:.0%}'}" for r, x in near.items())


def overall_summary(overall: pd.DataFrame, prefix: str, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """Mean and sd over seeds of accuracy, macro-F1 and boundary accuracy (and `extra` columns, a subset's
    "<name>_accuracy" shown as "<name>") per setting and method, beside the paper's; with a `seeds` column where a
    setting's methods ran on different numbers of seeds (the variant methods train on the first only)."""
    paper = load_claims()
    by = overall.groupby(["run", "method"], sort=False)
    summary = by[["accuracy", "macro_f1", "boundary_accuracy", *extra]].agg(["mean", "std"])
    summary.columns = [f"{m.removesuffix('_accuracy') if m in extra else m} {'sd' if s == 'std' else s}"
                       for m, s in summary.columns]
    seeds = by["seed"].nunique()
    if (seeds.groupby(level=0).nunique() > 1).any():
        summary.insert(0, "seeds", seeds)
    for col, suffix in (("paper accuracy", "acc"), ("paper macro-F1", "f1")):
        summary[col] = [paper.get(f"{prefix}.{PAPER_KEYS.get(m, '-')}.{suffix}", {}).get("paper") for _, m in summary.index]
    return summary.dropna(axis=1, how="all")


def ties_words(overall: pd.DataFrame, run: str | None = None) -> str:
    """Per probability mixture, the test inputs (mean over seeds, in setting `run` or all) whose float32 sum of
    probabilities, the computation before log space, had two classes tied at the top."""
    sel = overall if run is None or "run" not in overall else overall[overall["run"] == run]
    if TIES not in sel:
        return "not counted (results from before the mixtures moved to log space)"
    ties = sel.dropna(subset=[TIES]).groupby("method", sort=False)[TIES].mean()
    return ", ".join(f"{m} {v:.1f}" if v % 1 else f"{m} {v:.0f}" for m, v in ties.items()) + " of each seed's test inputs"


def room_to_rank(overall: pd.DataFrame, runs: list[str]) -> str:
    """The first of `runs` (settings, in the page's order) with room to rank RED against the softmax MoE: not both
    at the ceiling (mean accuracy >= 0.995), as the intro's answer reads it; the first run when none has room."""
    acc = overall[overall["method"].isin(["RED", "softmax MoE"])].groupby(["run", "method"])["accuracy"].mean()
    return next((r for r in runs if r in acc.index.get_level_values(0) and acc.loc[r].min() < CEILING), runs[0])


def per_range_table(per_range: pd.DataFrame, run_label: str) -> pd.DataFrame:
    """Accuracy per method (rows) and range (columns) in one setting (its label), mean over seeds."""
    main = per_range[per_range["run"] == run_label]
    return main.pivot_table(index="method", columns="range", values="accuracy", aggfunc="mean", sort=False)


def range_intervals(per_range: pd.DataFrame, method: str, seed: int) -> pd.DataFrame:
    """One method's accuracy per range in each setting for one seed, with distinct inputs and the 95% Wilson interval."""
    sel = per_range[(per_range["method"] == method) & (per_range["seed"] == seed)]
    return sel[["run", "range", "accuracy", "distinct inputs", "ci95 low", "ci95 high"]]


def near_misses(overall: pd.DataFrame) -> pd.DataFrame:
    """Share of each method's errors within ±NEAR of the true answer, per setting (mean over seeds)."""
    return overall.pivot_table(index="method", columns="run", values=f"errors within ±{NEAR}", sort=False)


def per_range_with_paper(per_range: pd.DataFrame, run_label: str, prefix: str) -> pd.DataFrame:
    """`per_range_table` in one setting, and the paper's rows of the four methods it reports beneath it."""
    ours = per_range_table(per_range, run_label)
    return pd.concat([ours, paper_per_range(ours.columns, prefix)])


def paper_per_range(columns, prefix: str) -> pd.DataFrame:
    """The paper's per-range accuracy of the four methods it reports, as rows 'paper: <method>'."""
    paper = load_claims()
    return pd.DataFrame({f"paper: {m}": paper[f"{prefix}.{k}.per_range"]["paper"] for m, k in PAPER_KEYS.items()},
                        index=columns).T


def epochs_table(epochs: pd.DataFrame, by: tuple[str, ...] = ("run", "stage")) -> pd.DataFrame:
    """Per stage (and setting): epochs run and best epoch (0-based; mean over seeds), the cap and patience it ran
    under, and in how many runs it was still improving at the cap (its best epoch within `patience` of the cap)."""
    capped = epochs.assign(at_cap=still_improving(epochs["best epoch"], epochs["max epochs"], epochs["patience"]))
    lr = {"lr": ("lr", "first")} if "lr" in epochs else {}
    out = capped.groupby(list(by), sort=False).agg(
        **lr, **{"epochs run": ("epochs run", "mean"), "best epoch": ("best epoch", "mean"),
           "max epochs": ("max epochs", "first"), "patience": ("patience", "first"), "runs": ("at_cap", "size"),
           "still improving at the cap": ("at_cap", "sum")})
    return out.astype({"max epochs": int, "patience": int, "runs": int, "still improving at the cap": int})


FAR_FACTOR, FAR_MARGIN = 1.3, 0.02  # a seed's stage 1 is far from the others above 1.3 x their median + 0.02


def stage1_seeds(epochs: pd.DataFrame, run: str | None = None) -> pd.DataFrame:
    """Every seed's stage 1 (in setting `run`, or the page's one setting): its rate, validation loss, epochs run and
    best epoch, and whether it stopped far from the other seeds (a validation loss above FAR_FACTOR x the seeds'
    median + FAR_MARGIN: an under-trained stage 1 that every later stage of that seed inherits)."""
    mine = (epochs["run"] == run) if run is not None and "run" in epochs else True
    s1 = epochs[(epochs["stage"] == "stage 1") & mine]
    out = s1[["seed", "lr", "val loss", "epochs run", "best epoch", "max epochs"]].reset_index(drop=True)
    return out.assign(**{"far from the other seeds": far(out["val loss"])})


def far(losses: pd.Series) -> pd.Series:
    """The far rule: which of these seeds' stage-1 validation losses lie above FAR_FACTOR x their median + FAR_MARGIN."""
    return losses > FAR_FACTOR * losses.median() + FAR_MARGIN


def far_seeds_words(table: pd.DataFrame) -> str:
    """'seed 1 (2.28 against the seeds' median 1.57)' for each stage 1 far from the others, or that none is."""
    flagged = table[table["far from the other seeds"]]
    median = table["val loss"].median()
    return ("; ".join(f"seed {int(s)} ({v:.3g} against the seeds' median {median:.3g})"
                      for s, v in zip(flagged["seed"], flagged["val loss"])) or "no seed")


def split_matrix(by_split: pd.DataFrame) -> pd.DataFrame:
    """Stage 1's validation loss per training seed (rows) and data split (columns), from one row per pair."""
    return by_split.pivot_table(index="training seed", columns="split", values="val loss")


def far_cause_words(by_split: pd.DataFrame) -> str:
    """For each training seed far from the others on its own split: whether it is also far from the other seeds on
    that split (its training) or not (a harder split); then every run far from the other seeds on a shared split."""
    wide = split_matrix(by_split)
    far_same = wide.apply(far)  # the far rule per split: far there is a seed's training, not its data
    own = pd.Series({s: wide.loc[s, s] for s in wide.index if s in wide.columns})
    if len(own) < 2:
        return "one seed: nothing to compare"
    words = []
    for s in own.index[far(own)]:
        col = wide[s].drop(s)
        cause = ("far from the other seeds on its split too: its training" if far_same.loc[s, s] else
                 f"its split is harder: the other seeds end at {col.min():.3g}-{col.max():.3g} on it")
        words.append(f"seed {s} ({own[s]:.3g}): {cause}")
    far_runs = [(s, p) for s in far_same.index for p in far_same.columns if far_same.loc[s, p]]
    shared = (f"on a shared split, {len(far_runs)} of {far_same.size} runs far from the other seeds ("
              + ", ".join(f"seed {s} on split {p}, {wide.loc[s, p]:.3g}" for s, p in far_runs) + ")" if far_runs else
              f"on a shared split, no run is far from the other seeds ({far_same.size} runs)")
    return "; ".join([*words, shared]) if words else f"no seed is far on its own split; {shared}"


def capped_stages(epochs: pd.DataFrame, by: tuple[str, ...] = ("run", "stage"), claims: pd.Series | None = None) -> str:
    """The stages still improving at their cap in some run, per setting, as 'stage runs-at-cap/runs' ('no stage'
    when none), then each capped run that is not already fit with its cause in words. `claims` marks the rows of the
    claims' runs (default: every row); the others are extensions, outside the paper's protocol."""
    table = epochs_table(epochs, by)
    hit = table[table["still improving at the cap"] > 0]
    words = [(k[:-1], k[-1]) if isinstance(k, tuple) else ((), k) for k in hit.index]
    groups: dict[tuple, list[str]] = {}
    for (setting, stage), n, r in zip(words, hit["still improving at the cap"], hit["runs"]):
        groups.setdefault(setting, []).append(f"{stage} {n}/{r}")
    words = "; ".join((f"{' / '.join(map(str, g))}: " if g else "") + ", ".join(v) for g, v in groups.items())
    if not words:
        return "no stage"
    if "val loss" in epochs:  # a stage already fit on validation can only creep closer to zero loss
        epochs = epochs.reset_index(drop=True)  # tables concatenated per seed repeat their row labels
        claims = pd.Series(True if claims is None else claims.to_numpy(), index=epochs.index)
        at_cap = still_improving(epochs["best epoch"], epochs["max epochs"], epochs["patience"])
        fit = int((epochs[at_cap]["val loss"] < FIT_LOSS).sum())
        words += (f" ({fit} of these {int(at_cap.sum())} runs end at a validation loss under {FIT_LOSS:g}: already "
                  "fit, their loss can only creep towards zero)") if fit else ""
        words += unfit_causes(epochs, at_cap & (epochs["val loss"] >= FIT_LOSS), claims, by)
    return words


SECOND_READINGS = ("global head all train",)  # stages of a labelled variant that no claim is judged on


def by_stage(rows: pd.DataFrame, by: tuple[str, ...]) -> str:
    """Capped runs grouped as the epochs table groups them: 'setting stage xN (final validation loss, or its range
    over the N runs)'."""
    g = rows.groupby(list(by), sort=False)["val loss"].agg(["size", "min", "max"])
    names = [" ".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in g.index]
    return ", ".join(f"{st}{f' x{n}' if n > 1 else ''} ({lo:.2g}{f'-{hi:.2g}' if f'{hi:.2g}' != f'{lo:.2g}' else ''})"
                     for st, n, lo, hi in zip(names, g["size"], g["min"], g["max"]))


def unfit_causes(epochs: pd.DataFrame, unfit: pd.Series, claims: pd.Series, by: tuple[str, ...]) -> str:
    """The capped runs not yet fit, in words, with what each rests on: in the claims' runs, its seed's stage 1
    (validation loss and best epoch against the other seeds'); a second reading; or an extension."""
    if not unfit.any():
        return ""
    run = epochs["run"] if "run" in epochs else pd.Series("", index=epochs.index)
    s1 = epochs[epochs["stage"] == "stage 1"]
    parts = []
    main = epochs[unfit & claims & ~epochs["stage"].isin(SECOND_READINGS)]
    for (r, seed), g in main.groupby([run[main.index], "seed"], sort=False):
        stages = ", ".join(f"{st} ({loss:.2g})" for st, loss in zip(g["stage"], g["val loss"]))
        mine = s1[(run[s1.index] == r) & (s1["seed"] == seed)]
        others = s1[(run[s1.index] == r) & (s1["seed"] != seed) & claims[s1.index]]
        worst = len(mine) and len(others) and mine["val loss"].iloc[0] > others["val loss"].max()
        base = (f", on a stage 1 that stopped at a validation loss of {mine['val loss'].iloc[0]:.3g} (best epoch "
                f"{mine['best epoch'].iloc[0]}; the other seeds': {', '.join(f'{x:.3g}' for x in others['val loss'])}"
                + ("; the worst stage 1 of the seeds, so these stages learn on poorer features)" if worst else ")")
                if len(mine) and len(others) else "")
        parts.append(f"{(r + ' ') if r else ''}seed {seed}: {stages}{base}")
    second = epochs[unfit & epochs["stage"].isin(SECOND_READINGS)]
    if len(second):
        parts.append("a second reading no claim is judged on: " + by_stage(second, by))
    ext = epochs[unfit & ~claims & ~epochs["stage"].isin(SECOND_READINGS)]
    if len(ext):
        parts.append("in the extensions (outside the paper's protocol; no claim's verdict rests on them): " + by_stage(ext, by))
    return ". Still improving and not yet fit (final validation loss in brackets): " + "; ".join(parts)


FIT_LOSS = 1e-3  # validation cross-entropy (nats) under which a stage counts as already fit


def budget_table(t: dict[str, pd.DataFrame], setting: str, seed: int, prefix: str) -> pd.DataFrame:
    """The extension under the paper's epoch budgets: each method's test accuracy on one seed of the claims' setting,
    under our protocol and under each budget, beside the paper's number (`<prefix>.<method>.acc`)."""
    paper, ov, b = load_claims(), t["overall"], t["paper_budget"]
    ours = ov[(ov["run"] == setting) & (ov["seed"] == seed)].set_index("method")["accuracy"]
    table = b.pivot_table(index="method", columns="budget", values="accuracy", sort=False)
    table.insert(0, "our protocol", ours.reindex(table.index))
    table["the paper"] = [paper.get(f"{prefix}.{PAPER_KEYS[m]}.acc", {}).get("paper") if m in PAPER_KEYS else None
                          for m in table.index]
    return table.rename_axis(None, axis=1)


def budget_words(t: dict[str, pd.DataFrame], setting: str, seed: int, prefix: str) -> str:
    """The uniform averaging and softmax MoE rows of `budget_table` in words ("not run" without the extension)."""
    if "paper_budget" not in t:
        return "not run (`-p extensions` with `paper_budget` runs it)"
    table = budget_table(t, setting, seed, prefix)
    ours, *budgets, _ = table.columns
    out = []
    for m in ("uniform averaging", "softmax MoE"):
        row = table.loc[m]
        theirs = "" if row["the paper"] is None else f"; the paper: {row['the paper']:.3g}"
        out.append(f"{m} {row[ours]:.3f} under our protocol, " + ", ".join(f"{row[b]:.3f} under {b}" for b in budgets)
                   + theirs)
    return "; ".join(out)
