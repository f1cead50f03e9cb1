"""Tables, claims (`ra.*`) and the values the conclusions paste in, of the routing-heatmaps page (`routing_heatmaps.py`
measures; this module reads its tables)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import measure
from ..core.claims import listing, seeds_words, verdict_keys
from ..core.settings import still_improving
from ..configs.routing_heatmaps import PAPER_PATIENCE, PAPER_SIZES, TARGET_DIGITS, RoutingHeatmapsConfig
from ..tasks import text_domains as td

MAJORITY = 0.5  # "most tokens": more than this share of a domain's tokens


def sizes(cfg: RoutingHeatmapsConfig) -> pd.DataFrame:
    """The text experiments' model and data sizes: this run's against the paper's."""
    return pd.DataFrame([{"experiment": e, "setting": k, "this run": getattr(cfg, f"{w}_{k}"), "the paper": v}
                         for e, w in (("1 code expert", "code"), ("3 domain experts", "domain"))
                         for k, v in PAPER_SIZES[w].items()])


def examples(cfg: RoutingHeatmapsConfig) -> pd.DataFrame:
    """One generated example per domain of experiments 1 and 3 (line breaks shown as ⏎)."""
    return pd.DataFrame([{"experiment": e, "domain": d, "example": td.generate(d, 1, cfg.seed)[0].replace("\n", " ⏎ ")}
                         for e, names in (("1", td.EXPERIMENT_DOMAINS["code"]), ("3", td.EXPERIMENT_DOMAINS["domains"]))
                         for d in names])


def by_domain(routing: pd.DataFrame, first: int | None = None) -> pd.DataFrame:
    """Per seed (and setting), domain and expert: mean routing weight over samples, and the share of the domain's
    tokens whose top expert it is; `first` keeps only the first samples of each domain (the paper analysed 5)."""
    df = routing if first is None else routing[routing["sample"] < first]
    keys = [k for k in ("setting", "seed") if k in df] + ["domain", "expert"]
    out = df.groupby(keys, sort=False).agg(weight=("weight", "mean"), top=("top tokens", "sum"), tokens=("tokens", "sum"))
    out["token share"] = out.pop("top") / out.pop("tokens")
    return out.reset_index()


def heat(table: pd.DataFrame, value: str, index: str = "domain", names: list[str] | None = None) -> pd.DataFrame:
    """Mean over seeds of `value`, rows `index` (in first-seen order), one column per expert."""
    out = table.pivot_table(index=index, columns="expert", values=value, sort=False)
    out.columns = names or [f"E{e}" for e in out.columns]
    return out


def expert0(table: pd.DataFrame) -> pd.DataFrame:
    """Experiment 1: expert 0's mean weight and token share per domain, mean and sd over seeds."""
    e0 = table[table["expert"] == 0]
    out = e0.groupby("domain", sort=False)[["weight", "token share"]].agg(["mean", "std"])
    out.columns = [f"expert 0 {m} ({s})" for m, s in out.columns]
    return out


def digit_table(per_digit: pd.DataFrame) -> pd.DataFrame:
    """Experiment 2, per seed, digit and expert: share of test digits whose top expert it is, and mean gate weight."""
    experts = [c for c in per_digit if c.startswith("w")]
    rows = []
    for (seed, digit), g in per_digit.groupby(["seed", "digit"]):
        for e, c in enumerate(experts):
            rows.append({"seed": seed, "digit": digit, "expert": e, "top share": float((g["top"] == e).mean()),
                         "weight": float(g[c].mean())})
    return pd.DataFrame(rows)


def digit_contrast(per_digit: pd.DataFrame, accuracy: dict[int, float]) -> pd.DataFrame:
    """Experiment 2, per seed: expert 0's top-1 share and mean weight on digits 0 and 7 against the other digits."""
    rows = []
    for seed, g in per_digit.groupby("seed"):
        target = g["digit"].isin(TARGET_DIGITS)
        top0 = g["top"] == 0
        a, b = float(top0[target].mean()), float(top0[~target].mean())
        rows.append({"seed": seed, "MoE accuracy": accuracy[seed], "top share 0 and 7": a, "top share other digits": b,
                     "ratio": a / b if b else np.inf, "difference": a - b,
                     "weight 0 and 7": float(g.loc[target, "w0"].mean()), "weight other digits": float(g.loc[~target, "w0"].mean())})
    return pd.DataFrame(rows)


def matching(table: pd.DataFrame, names: tuple[str, ...]) -> pd.DataFrame:
    """Experiment 3, per setting, seed and domain: share of the domain's tokens routed (top-1) to its own expert,
    whether that is a majority, and whether the own expert is the one most chosen."""
    own = table["expert"] == table["domain"].map({n: i for i, n in enumerate(names)})
    best = table.groupby(["setting", "seed", "domain"], sort=False)["token share"].transform("max")
    out = table[own].copy()
    out["majority"] = out["token share"] > MAJORITY
    out["most chosen"] = out["token share"] >= best[own]
    return out[["setting", "seed", "domain", "token share", "weight", "majority", "most chosen"]].reset_index(drop=True)


def claims(cfg: RoutingHeatmapsConfig, code: pd.DataFrame, contrast: pd.DataFrame, match: pd.DataFrame,
           code_first5: pd.DataFrame) -> dict[str, dict]:
    """ra.code_expert, ra.mnist07 and ra.domain_match, per seed; experiment 3 judged without entropy regularisation,
    with it beside as an extension."""
    e0 = code[code["expert"] == 0].pivot_table(index="seed", columns="domain", values="weight", sort=False)
    others = e0.drop(columns="code")
    first5 = code_first5[code_first5["expert"] == 0].pivot_table(index="seed", columns="domain", values="weight")
    out = {"ra.code_expert": measure.order(
        (e0["code"] > others.max(axis=1)).tolist(), bool(e0["code"].mean() > others.mean().max()),
        value={d: float(v) for d, v in e0.mean().items()},
        measure="expert 0's mean routing weight per domain, held-out samples",
        pairs=[("code", "the highest other domain", e0["code"].tolist(), others.max(axis=1).tolist())],
        first_5_samples_holds=[bool(first5.loc[s, "code"] > first5.loc[s].drop("code").max()) for s in first5.index])}
    out["ra.mnist07"] = measure.order(
        (contrast["top share 0 and 7"] > contrast["top share other digits"]).tolist(),
        bool(contrast["top share 0 and 7"].mean() > contrast["top share other digits"].mean()),
        value={"0 and 7": float(contrast["top share 0 and 7"].mean()),
               "other digits": float(contrast["top share other digits"].mean()),
               "ratio": float(contrast["ratio"].mean()), "difference": float(contrast["difference"].mean())},
        measure="share of test digits whose top expert is expert 0",
        pairs=[("0 and 7", "other digits", contrast["top share 0 and 7"].tolist(),
                contrast["top share other digits"].tolist())])
    judged = _domain_claim(match[match["setting"] == setting_name(0.0)])
    if cfg.entropy_weight:
        judged["extensions"] = {f"with entropy regularisation (weight {cfg.entropy_weight:g})":
                                _domain_claim(match[match["setting"] == setting_name(cfg.entropy_weight)])}
    out["ra.domain_match"] = judged
    return out


def converged_label(cfg: RoutingHeatmapsConfig) -> str:
    """The name of the extension that trains every phase longer: until its validation loss stops improving, or its cap
    (a stage still improving there is counted on the page)."""
    return (f"trained longer (first seed: until validation stops improving for {PAPER_PATIENCE} epochs, or "
            f"{cfg.converge_cap} epochs)")


def with_converged(out: dict[str, dict], cfg: RoutingHeatmapsConfig, ext: dict[str, pd.DataFrame] | None
                   ) -> dict[str, dict]:
    """The claims with the converged run's measurement of each beside it as an extension (none when not run)."""
    if ext is None:
        return out
    for cid, entry in claims(cfg, ext["code"], ext["contrast"], ext["match"], ext["code_first5"]).items():
        entry.pop("extensions", None)
        out[cid].setdefault("extensions", {})[converged_label(cfg)] = entry
    return out


def epochs_words(epochs: pd.DataFrame) -> str:
    """'exp 1: code expert 12, MoE 31; exp 2: ...': epochs run per stage, then the stages still improving at the cap."""
    name = epochs["stage"].str.replace(r", (.*)$", r" (\1)", regex=True)  # "MoE, entropy weight 0" inside a list
    capped = still_improving(epochs["best epoch"], epochs["max epochs"], PAPER_PATIENCE)
    runs = "; ".join(f"exp {x}: " + ", ".join(f"{n} {int(r)}" for n, r in zip(name[g.index], g["epochs run"]))
                     for x, g in epochs.groupby("experiment", sort=False))
    at_cap = ", ".join(f"exp {x} {n}" for x, n in zip(epochs.loc[capped, "experiment"], name[capped]))
    return f"{runs}; still improving at the cap: {at_cap or 'none'}"


def setting_name(weight: float) -> str:
    """The label of an entropy-regularisation setting."""
    return "no entropy regularisation" if weight == 0 else f"entropy weight {weight:g}"


def _domain_claim(m: pd.DataFrame) -> dict:
    per_seed = m.groupby("seed")["majority"].all()
    mean = m.groupby("domain", sort=False)["token share"].mean()
    return measure.order(per_seed.tolist(), bool((mean > MAJORITY).all()), value={d: float(v) for d, v in mean.items()},
                         measure=f"share of each domain's tokens whose top expert is its own (> {MAJORITY} in every domain)",
                         most_chosen_per_seed=m.groupby("seed")["most chosen"].all().tolist())


def same_top(table: pd.DataFrame) -> pd.Series:
    """Per (setting, seed): whether one expert is the top choice (largest token share) of every domain."""
    top = table.loc[table.groupby(["setting", "seed", "domain"], sort=False)["token share"].idxmax()]
    return top.groupby(["setting", "seed"], sort=False)["expert"].nunique() == 1


def found(cfg: RoutingHeatmapsConfig, measured: dict[str, dict], v: dict[str, str], contrast: pd.DataFrame,
          match: pd.DataFrame, domains: pd.DataFrame) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `ra_*`)."""
    c, m = measured["ra.code_expert"]["value"], measured["ra.mnist07"]["value"]
    others = [w for d, w in c.items() if d != "code"]
    share = {w: match[match["setting"] == setting_name(w)].groupby("domain", sort=False)["token share"].mean()
             for w in (0.0, cfg.entropy_weight)}
    one_top = same_top(domains)
    sizes = {w: "the paper's" if cfg.paper_sizes(w) else "smaller than the paper's" for w in ("code", "domain")}
    return {
        "ra_n_seeds": seeds_words(len(cfg.seeds)), "ra_code_sizes": sizes["code"], "ra_domain_sizes": sizes["domain"],
        "ra_code_share": c["code"], "ra_other_low": min(others), "ra_other_high": max(others),
        "ra_any_low": min(c.values()), "ra_majority": MAJORITY,
        "ra_moe_acc": contrast["MoE accuracy"].mean(), "ra_07": m["0 and 7"], "ra_other_digits": m["other digits"],
        "ra_ratio": m["ratio"], "ra_difference": m["difference"],
        "ra_ratio_low": contrast["ratio"].min(), "ra_ratio_high": contrast["ratio"].max(),
        "ra_own_plain": listing(share[0.0]), "ra_own_entropy": listing(share[cfg.entropy_weight]),
        "ra_entropy_weight": f"{cfg.entropy_weight:g}", "ra_one_top": int(one_top.sum()), "ra_runs": len(one_top),
        "ra_converged_first": converged_first_seed(cfg, measured), **verdict_keys(cfg.KEY, v),
    }


def converged_first_seed(cfg: RoutingHeatmapsConfig, measured: dict[str, dict]) -> str:
    """Each claim's ordering on the first seed trained longer, beside the same seed at the paper's epochs: a fact about
    one seed, not a verdict (one seed has no spread: the extension table's paired rule reads it as a tie)."""
    label, words = converged_label(cfg), []
    first = lambda e: "claimed order" if e["per_seed"][0] else "another order"  # noqa: E731
    for cid, entry in measured.items():
        ext = entry.get("extensions", {}).get(label)
        if ext and ext.get("per_seed") and entry.get("per_seed"):
            words.append(f"{cid} {first(ext)} (paper's epochs: {first(entry)})")
    return "; ".join(words) or "not run"
