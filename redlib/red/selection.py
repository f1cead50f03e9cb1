"""Every stage kind's learning rate, chosen on validation loss from one grid, the same grid for every method.

The paper trains every stage at 1e-4 for at most 60 epochs, a rate set for Qwen3-0.6B; on our backbones many
stages are still improving at that cap, so a verdict on them would be about the training budget. Here each stage
kind is trained at every rate of `head_lr_grid`, and the rate with the lowest validation loss (mean over a kind's
domains) is kept for that kind, for every seed and setting of the page. Stage 1 (the encoder's top and the global
head, which every method shares) is tried on every seed of the protocol and chosen on the mean of their validation
losses: a rate chosen on one seed can be unstable on another. The small stages on its features (classifier experts,
RED residuals, code experts, router, global head on all of train) are tried on the first seed, then the gates and
stage 4, which train on those modules. A kind whose best rate is the grid's largest might do better higher still, so
it alone is tried at the next rate up (1e-2, then 3e-2), up to `head_lr_extend` times, by the same rule for every
method; the grid starts at the paper's 1e-4 and no kind is tried below it. Test data play no part.
With `lr_rung` > 0 the grid is halved successively: every try first trains `lr_rung` epochs (its own cache entry:
the full try's first epochs, bit for bit), and only each kind's `lr_keep` rates with the lowest validation loss go on
to the end, where the same rule chooses among them (`rung_rule` replays this on a full grid's recorded curves, to
show whether it keeps the full grid's rate and what it saves). `head_lr_grid="none"` keeps the config's rates
(`lr` for stage 1, `head_lr` for the rest). Each try is an ordinary cached stage, so a chosen rate's run is never
trained twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from ..core.store import Store
from ..core.settings import still_improving
from .schedule import prefetch
from .clock import by_kind
from .encoders import Encoder
from .stages import Stages
from .types import RedConfig, TaskData

# the kinds tried together; a later round trains on the modules an earlier round chose
ROUNDS = (("stage1",), ("expert", "residual", "code", "router", "head_all"), ("gate", "joint", "code_gate"))
PER_DOMAIN = ("expert", "residual", "code")
RUNG_LOSS = "val loss after the rung"  # a selection table's column with lr_rung > 0
KIND_NAMES = {"stage1": "stage 1 (encoder top + global head)", "expert": "classifier experts E_i",
              "residual": "RED residuals", "code": "code experts", "router": "router",
              "head_all": "global head on all of train", "gate": "softmax MoE gate", "joint": "RED stage 4 (joint)",
              "code_gate": "code MoE gate"}


Seeded = tuple[TaskData, Encoder, int]  # one seed's data, its encoder, and the seed


@dataclass
class LrChoice:
    """The learning rate of each stage kind, and the validation losses it was chosen on."""

    lrs: dict[str, float] = field(default_factory=dict)  # kind -> lr ({}: the config's lr and head_lr)
    table: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per (kind, lr tried)
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)  # every try's validation loss per epoch


def kinds(cfg: RedConfig) -> list[tuple[str, ...]]:
    """The rounds of stage kinds this config trains."""
    return [tuple(k for k in r if k != "code_gate" or cfg.CODE_MOE) for r in ROUNDS]


def next_rate(lr: float) -> float:
    """The next learning rate up in the 1, 3, 10 series (1e-3 -> 3e-3 -> 1e-2)."""
    e = math.floor(math.log10(lr) + 1e-9)
    return float(f"{(3 if lr / 10 ** e < 2.5 else 10) * 10 ** e:.1g}")


def select(cfg: RedConfig, data: TaskData, encoder: Encoder, store: Store, seed: int,
           others: tuple[Seeded, ...] = ()) -> LrChoice:
    """Each stage kind's learning rate from `cfg.lr_grid()`, chosen on validation loss: stage 1 on the mean over this
    seed and the `others` (the protocol's other seeds, each with its own data), every later kind on this seed; a
    kind whose best rate is the largest tried is tried one rate up (`next_rate`), up to `cfg.head_lr_extend` times."""
    grid = cfg.lr_grid()
    if not grid:
        return LrChoice()
    chosen: dict[str, float] = {}
    base: Stages | None = None  # stage 1 at its chosen rate, with the features (after the first round)
    rows, tried_rows = [], []
    for kinds_ in kinds(cfg):
        tried, seconds, on = [], {}, {k: grid for k in kinds_}  # on: the rates each kind is trained at to the end
        if cfg.lr_rung:  # every rate a rung of epochs first; only each kind's lr_keep best go on
            rung = []
            for lrs in [{k: lr for k in kinds_} for lr in grid]:
                rung += _attempt(cfg, (data, encoder, seed), others, store, base, chosen, lrs, seconds,
                                 {k: cfg.lr_rung for k in kinds_})
            at_rung = _per_rate(pd.DataFrame(rung))
            on = survivors(at_rung, cfg.lr_keep)
        for lrs in [{k: lr for k in kinds_ if lr in on[k]} for lr in grid]:
            tried += _attempt(cfg, (data, encoder, seed), others, store, base, chosen, lrs, seconds) if lrs else []
        for _ in range(cfg.head_lr_extend):
            edge = _edge(_per_rate(pd.DataFrame(tried)), max(grid))
            if not edge:
                break
            tried += _attempt(cfg, (data, encoder, seed), others, store, base, chosen, edge, seconds)
        per = _per_rate(pd.DataFrame(tried))
        tried_rows += tried
        if cfg.lr_rung:
            per = _with_rung(per, at_rung)
        per["seconds"] = [seconds.get((f"{data.namespace}/{k}", lr), 0.0) for k, lr in zip(per["kind"], per["lr"])]
        chosen.update(_best(per))
        rows.append(per)
        if base is None:  # the encoder holds the last try's weights: load the chosen stage 1 (a cache hit) into it
            base = _stage1(cfg, data, encoder, store, seed, chosen["stage1"])
    table = pd.concat(rows, ignore_index=True)
    curves = pd.DataFrame([{"stage kind": KIND_NAMES[r["kind"]], "stage": r["stage"], "lr": r["lr"], "seed": r["seed"],
                            "epoch": e, "val loss": v} for r in tried_rows for e, v in enumerate(r["curve"])])
    table["chosen"] = [chosen[k] == lr for k, lr in zip(table["kind"], table["lr"])]
    table.insert(0, "stage kind", table.pop("kind").map(KIND_NAMES))
    return LrChoice({k: chosen[k] for r in kinds(cfg) for k in r}, table.assign(seed=seed), curves)


def survivors(at_rung: pd.DataFrame, keep: int) -> dict[str, list[float]]:
    """Each kind's `keep` rates with the lowest mean validation loss after the rung (`_per_rate` of the rung tries)."""
    return {k: sorted(m.nsmallest(keep, "val loss")["lr"]) for k, m in at_rung.groupby("kind", sort=False)}


def _with_rung(per: pd.DataFrame, at_rung: pd.DataFrame) -> pd.DataFrame:
    """The rates tried to the end (`per`) with each one's validation loss after the rung, then the rates dropped
    there (their rung's row, no final loss)."""
    rung = at_rung.set_index(["kind", "lr"])
    per = per.set_index(["kind", "lr"]).assign(**{RUNG_LOSS: rung["val loss"]})
    dropped = rung.loc[rung.index.difference(per.index, sort=False)]
    dropped = dropped.assign(**{RUNG_LOSS: dropped["val loss"], "val loss": float("nan"),
                                "highest val loss of its stages": float("nan")})
    order = {k: i for i, k in enumerate(at_rung["kind"].unique())}
    both = pd.concat([per, dropped]).reset_index()
    return both.sort_values(["kind", "lr"], key=lambda c: c.map(order) if c.name == "kind" else c, ignore_index=True)


def _attempt(cfg: RedConfig, first: Seeded, others: tuple[Seeded, ...], store: Store, base: Stages | None,
             chosen: dict[str, float], lrs: dict[str, float], seconds: dict, caps: dict[str, int] | None = None
             ) -> list[dict]:
    """Train (or load) the stages of the kinds in `lrs`, each at its rate (and capped at `caps` epochs: a rung):
    stage 1 (`base` None) on the first seed and the others, a later kind on `base` (stage 1 at its chosen rate, first
    seed); one row per stage with its validation loss and seed, and their cost added to `seconds`."""
    seen, borrowed, rows = len(store.events), store.borrowed, []
    if base is None:
        for data, encoder, seed in (first, *others):
            st = Stages(cfg, data, encoder, store, seed, lrs=lrs, caps=caps)
            st.base()
            rows.append({"kind": "stage1", "lr": lrs["stage1"], "seed": seed, **st.epochs[-1],
                         "curve": [] if caps else st.curves[-1]})  # a rung's curve is the start of the full try's
            if encoder is not first[1]:
                encoder.release()  # its prefix states load again for its next try; one seed's at a time in memory
        # a try a worker trained (`experiments/stage1_runs.py`) loads here: its seconds are the worker's
        key = (f"{first[0].namespace}/stage1", lrs["stage1"])
        seconds[key] = seconds.get(key, 0.0) + store.borrowed - borrowed
    else:
        jobs = [(k, i) for k in lrs for i in (range(first[0].n_domains) if k in PER_DOMAIN else [None])]
        st = base.fork({**chosen, **lrs}, caps)
        prefetch(st, jobs, {})
        for job in jobs:
            st.get(job)  # a job's inputs load first; its own stage is the last row added
            rows.append({"kind": job[0], "lr": lrs[job[0]], "seed": first[2], **st.epochs[-1],
                         "curve": [] if caps else st.curves[-1]})
    by_kind(store, seen, lrs, seconds)
    return rows


def _edge(per: pd.DataFrame, grid_top: float) -> dict[str, float]:
    """The kinds whose best rate is the largest they were tried at (the grid's, a rate dropped at a rung included),
    each with the next rate up (none above 1)."""
    top = per.groupby("kind")["lr"].max().clip(lower=grid_top)
    return {k: next_rate(lr) for k, lr in _best(per).items() if lr == top[k] and next_rate(lr) <= 1}


def _stage1(cfg: RedConfig, data: TaskData, encoder: Encoder, store: Store, seed: int, lr: float) -> Stages:
    """Stage 1 at `lr` (trained, or loaded into the encoder) with its pooled features: what the later rounds train on."""
    st = Stages(cfg, data, encoder, store, seed, lrs={"stage1": lr})
    st.base()
    st.features()
    return st


def _best(per: pd.DataFrame) -> dict[str, float]:
    """Each kind's rate with the lowest validation loss (the first tried, on a tie)."""
    return {k: float(m.loc[m["val loss"].idxmin(), "lr"]) for k, m in per.groupby("kind", sort=False)}


def _largest_tried(table: pd.DataFrame) -> pd.Series:
    """Whether each row's rate is the largest its stage kind was tried at."""
    return table["lr"] == table.groupby("stage kind")["lr"].transform("max")


def _per_rate(tried: pd.DataFrame) -> pd.DataFrame:
    """One row per (kind, rate) tried: the mean validation loss over the kind's stages (its domains, or stage 1's
    seeds) and the highest, how many seeds, epochs, stages at the cap."""
    tried["at cap"] = still_improving(tried["best epoch"], tried["max epochs"], tried["patience"])
    return tried.groupby(["kind", "lr"], sort=False).agg(
        **{"val loss": ("val loss", "mean"), "highest val loss of its stages": ("val loss", "max"),
           "seeds": ("seed", "nunique"), "epochs run": ("epochs run", "max"),
           "best epoch": ("best epoch", "max"), "max epochs": ("max epochs", "first"),
           "still improving at the cap": ("at cap", "sum"), "stages": ("at cap", "size")}).reset_index()


def chosen_words(table: pd.DataFrame) -> str:
    """'kind lr, kind lr, ...' from a selection table, for a page's prose (or that the paper's rate was kept)."""
    if table.empty:
        return "none: stage 1 at the config's lr and every small stage at its head_lr (head_lr_grid='none')"
    hit = table[table["chosen"]]
    return ", ".join(f"{k} {lr:g}" for k, lr in zip(hit["stage kind"], hit["lr"]))


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """The selection as the page shows it: per stage kind, the validation loss at each rate tried and the choice."""
    loss = table.pivot_table(index="stage kind", columns="lr", values="val loss", sort=False)
    loss.columns = [f"val loss at {lr:g}" for lr in loss.columns]
    hit = table[table["chosen"]].assign(top=_largest_tried(table)).set_index("stage kind")
    if RUNG_LOSS in table:  # successive halving: the rates each kind dropped after its rung
        dropped = table[table["val loss"].isna()].groupby("stage kind", sort=False)["lr"]
        loss["dropped after the rung"] = dropped.agg(lambda v: ", ".join(f"{x:g}" for x in sorted(v))).reindex(
            loss.index).fillna("none")
    return loss.assign(**{"chosen lr": hit["lr"].map("{:g}".format) + hit["top"].map({True: " (the largest tried)",
                                                                                      False: ""}),
                          "epochs run at it (max)": hit["epochs run"],
                          "stages still improving at the cap": hit["still improving at the cap"].astype(str) + "/"
                          + hit["stages"].astype(str)})


def found(prefix: str, cfg: RedConfig, table: pd.DataFrame | None) -> dict[str, str]:
    """The glue values a page's prose names its learning-rate choice with: `<prefix>_lrs`, `<prefix>_lr_grid`,
    `<prefix>_lr_edge` (None: the run chose none)."""
    grid, table = cfg.lr_grid(), pd.DataFrame() if table is None else table
    edge = table[table["chosen"] & _largest_tried(table)]["stage kind"].tolist() if len(table) else []
    steps = [grid[-1]] if grid else []
    for _ in range(cfg.head_lr_extend if grid else 0):
        steps.append(next_rate(steps[-1]))
    extend = f"; a kind whose best is the largest tried, then at {', '.join(f'{v:g}' for v in steps[1:])}" if steps[1:] else ""
    return {f"{prefix}_lrs": chosen_words(table),
            f"{prefix}_lr_grid": (", ".join(f"{v:g}" for v in grid) + extend) if grid
            else "no grid (head_lr_grid='none')",
            f"{prefix}_lr_edge": ", ".join(edge) or "no kind (every choice lies below the largest rate tried)"}


def rung_rule(curves: pd.DataFrame, rung: int, keep: int | None = None, grid: list[float] | None = None) -> dict:
    """Successive halving of one stage kind's rates, replayed on the full grid's curves (`LrChoice.curves`): every
    try (a seed's or a domain's stage) runs `rung` epochs (one that early stopping ended sooner is complete), the
    `keep` rates of the `grid` (None: the better half) with the lowest mean of the best validation loss so far go on to
    the end, and the kept rate is theirs with the lowest mean final loss, the full grid's rule; where that is the
    grid's largest, the rates the full grid tried above it run too. What it keeps, whether that is the full grid's
    choice, and the epochs each rule trains."""
    tries = ["lr", "seed", "stage"] if "stage" in curves else ["lr", "seed"]
    by_try = curves.groupby(tries)["val loss"]
    final, epochs = by_try.min().groupby("lr").mean(), by_try.size()
    edge = max(grid or final.index)
    grid = [lr for lr in final.index if lr in (grid or final.index)]
    at_rung = curves[curves["epoch"] < rung].groupby(tries)["val loss"].min().groupby("lr").mean()[grid]
    # the selection's own ranking (`survivors`), on the rung losses the curves give
    on = survivors(pd.DataFrame({"kind": "", "lr": at_rung.index, "val loss": at_rung.to_numpy()}),
                   keep or math.ceil(len(grid) / 2))[""]
    above = [lr for lr in final.index if lr not in grid] if final[on].idxmin() == edge else []
    kept = float(final[on + above].idxmin())
    # a survivor's full try starts again from scratch (the rung's entry is its own): its rung epochs count twice
    rule_epochs = sum(min(n, rung) * (idx[0] in grid) + n * (idx[0] in on + above) for idx, n in epochs.items())
    return {"rung (epochs)": rung, "rates kept": len(on), "survivors": ", ".join(f"{lr:g}" for lr in on),
            "full grid's choice": f"{final.idxmin():g}", "the rule's choice": f"{kept:g}",
            "same": kept == float(final.idxmin()), "epochs, full grid": int(epochs.sum()), "epochs, the rule": rule_epochs,
            "saved": 1 - rule_epochs / epochs.sum()}
