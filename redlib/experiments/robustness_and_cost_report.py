"""The robustness page's tables, claims and the values its conclusions paste in: accuracy lost to routing noise, the
plug-in verdict, the ablations against the paper's numbers (the measurements themselves are `robustness_and_cost.py`'s)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..configs.robustness_and_cost import RobustnessConfig
from ..core import measure
from ..core.claims import load_claims, rate, seed_list, seeds_words, small, verdict, verdict_keys
from ..core.settings import ended_at_cap
from ..red import methods, perturbation
from ..red.cost import PAPER_FORMULA
from . import range_tables

ROUTED = ("RED", "softmax MoE", "softmax MoE (RED's router)")  # methods whose gate the perturbations hit


def rank_table(rank: pd.DataFrame) -> pd.DataFrame:
    """RED accuracy per rank divisor and task (mean and sd over seeds), beside the paper's (d/2, d/4, d/8)."""
    out = rank.pivot_table(index=["rank divisor", "rank"], columns="task", values="accuracy", aggfunc=["mean", "std"])
    out.columns = [f"{task} {stat}" for stat, task in out.columns]
    paper = load_claims()["abl.rank"]["paper"]
    for i, task in enumerate(("Task 1", "Task 2")):
        out[f"{task} paper"] = [paper.get(f"d/{k}", [None, None])[i] for k, _ in out.index]
    return out[sorted(out.columns)]


def rank_caption(rank: pd.DataFrame) -> str:
    """The rank table's caption, naming the seeds it averages (its d/4 row is the source pages' runs of those seeds
    only, so it can differ from their pages' mean over all their seeds)."""
    return (f"Rank ablation: RED's accuracy per rank (iid), mean and sd over {seed_list(rank['seed'])} (d/4: the "
            "Task 1 and Task 2 pages' own runs of those seeds; their pages average all their seeds), beside the paper's")


def no_residual_table(nr: pd.DataFrame) -> pd.DataFrame:
    """Accuracy of RED, its no-residual ablation and the MoE baseline per task, and both readings of the drop."""
    acc = nr.pivot_table(index="method", columns="task", values="accuracy", sort=False)
    paper = load_claims()["abl.no_residual"]["paper"]
    drops = pd.DataFrame({"drop: RED minus the ablation": acc.loc["RED"] - acc.loc[methods.NO_RESIDUAL],
                          "drop: RED minus the MoE baseline (the paper's reading)": acc.loc["RED"] - acc.loc["softmax MoE"],
                          **({"drop: RED minus the released code's MoE": acc.loc["RED"] - acc.loc[methods.CODE_MOE]}
                             if has_code_moe(nr) else {}),
                          "paper's drop": pd.Series({"Task 1": paper["task1_drop"], "Task 2": paper["task2_drop"]})}).T
    return pd.concat([acc, drops])


def mean_drop(sw: pd.DataFrame) -> pd.DataFrame:
    """Accuracy lost to routing perturbations: clean minus perturbed, mean over every perturbation and strength > 0,
    per task, seed and method."""
    clean = sw[sw["perturbation"] == "none"].set_index(["task", "seed", "method"])["accuracy"]
    hit = sw[(sw["perturbation"] != "none") & (sw["strength"] > 0)]
    lost = clean.reindex(pd.MultiIndex.from_frame(hit[["task", "seed", "method"]])).to_numpy() - hit["accuracy"].to_numpy()
    return hit.assign(lost=lost).groupby(["task", "seed", "method"], sort=False)["lost"].mean().reset_index()


def plug_in(t: dict[str, pd.DataFrame], task: str, tol: float) -> dict[str, Any]:
    """mod.plug_in on one task: per seed, whether removing or replacing an expert moves RED's accuracy on the other
    domains by at most `tol`, and whether adding the last expert later gives the all-at-once system."""
    def elsewhere(df: pd.DataFrame, method: str) -> pd.Series:
        d = df[(df["task"] == task) & (df["method"] == method)]
        d = d[d["domain"].str.split().str[0] != d["expert"]]
        return d["change"].abs().groupby(d["seed"]).max()

    removal, replacement = elsewhere(t["removed"], "RED"), elsewhere(t["replaced"], "RED")
    add = t["added"][t["added"]["task"] == task]
    wide = add.pivot_table(index=["seed", "domain"], columns="system", values="accuracy")
    later, at_once = [c for c in wide.columns if "later" in c][0], "all experts at once"
    addition = (wide[later] - wide[at_once]).abs().groupby(level="seed").max()
    identical = add.groupby("seed")["identical_to_all_at_once"].all()
    seeds = list(replacement.index)  # the seeds that trained a replacement and a late expert
    holds = [bool(removal[s] <= tol and replacement[s] <= tol and addition[s] <= tol and identical[s]) for s in seeds]
    value = {"removal: largest change on other domains": float(removal.max()),
             "replacement: largest change on other domains": float(replacement.max()),
             "addition: largest difference to all at once": float(addition.max())}
    untouched = [df[(df["task"] == task) & (df["method"] == "RED") & (df["domain"].str.split().str[0] != df["expert"])]
                 for df in (t["removed"], t["replaced"])]
    compared = [float(v) for d in untouched for v in (d["before"].mean(), d["accuracy"].mean())]
    return measure.order(holds, all(holds), value=value, tolerance=tol, task=task, compared=compared,
                         moe_removal=float(elsewhere(t["removed"], "softmax MoE").max()),
                         moe_replacement=float(elsewhere(t["replaced"], "softmax MoE").max()),
                         identical_after_addition=bool(identical.all()))


DROP_KEYS = {"task1_drop": "Task 1", "task2_drop": "Task 2"}  # the claims file's keys of abl.no_residual


def has_code_moe(nr: pd.DataFrame) -> bool:
    """Whether the no-residual runs scored the released code's MoE on both tasks (runs from before it did not)."""
    return all(((nr["task"] == task) & (nr["method"] == methods.CODE_MOE)).any() for task in DROP_KEYS.values())


def moves(x: float) -> str:
    """How far a largest change went, in words: "not at all" for none (never "at most 0"), else "by at most 0.012"."""
    return "not at all" if x == 0 else f"by at most {small(x)}"


def code_moe_drops(nr: pd.DataFrame) -> str:
    """RED minus the released code's MoE on each task, paired by seed on the seeds its variants trained on."""
    if not has_code_moe(nr):
        return "not run"
    drop = _drop(nr, methods.CODE_MOE)
    n, every = len(drop["per_seed"]), nr["seed"].nunique()
    return ", ".join(f"{small(drop['value'][key], sign=True)} ({task})" for key, task in DROP_KEYS.items()) + (
        f" (on {seeds_words(n)} of {every}, where the variants trained)" if n < every else "")


def _drop(nr: pd.DataFrame, other: str) -> dict[str, Any]:
    """RED's accuracy minus `other`'s on each task, paired by seed: value (means) and per seed, keyed as the claim."""
    wide = {key: nr[nr["task"] == task].pivot_table(index="seed", columns="method", values="accuracy")
            for key, task in DROP_KEYS.items()}
    # paired by seed, on the seeds that scored `other` (the released code's MoE: the seeds its variants trained on)
    diff = {key: (w["RED"] - w[other]).dropna() for key, w in wide.items()}
    seeds = diff["task1_drop"].index.intersection(diff["task2_drop"].index)
    return {"value": {k: float(v.mean()) for k, v in diff.items()},
            "per_seed": [{k: float(v.loc[s]) for k, v in diff.items()} for s in seeds]}


def profile_words(cfg: RobustnessConfig) -> str:
    """The page's opening line: the source pages' seeds and data, the rank divisors and the stability tolerance."""
    t1, t2, mn = cfg.sources().values()  # Task 1, Task 2, MNIST
    return (f"Profile **{cfg.profile}**: seeds {cfg.seeds} of the Task 1 and Task 2 pages (iid split, backbone "
            f"`{cfg.backbone}`, dataset `{t1.dataset_size}` / `{t2.dataset_size}`) and of the MNIST page "
            f"({mn.data_label}); rank divisors {cfg.ranks}; stability tolerance {cfg.stable_tol}.")


def claims(cfg: RobustnessConfig, t: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """Every rob.*, mod.*, abl.* and eff.* claim: judged on Task 1 under the paper's protocol (and Task 2 where the
    paper gives both); MNIST (and Task 2, for routing noise) beside it as extensions."""
    drops = mean_drop(t["sweep"]).pivot_table(index=["task", "seed"], columns="method", values="lost")

    def noise(task: str) -> dict:
        d = drops.loc[task]
        return {**measure.ordering(-d, ["RED", "softmax MoE"]), "value": {m: float(d[m].mean()) for m in ROUTED},
                "measure": "accuracy lost, mean over every perturbation and strength (lower is more graceful)",
                "task": task}

    beside = [task for task in ("MNIST", "Task 2") if task in drops.index.get_level_values("task")]
    out = {"rob.routing_noise": {**noise("Task 1"), "extensions": {task: noise(task) for task in beside}}}
    bnd = t["boundary"].pivot_table(index="seed", columns="method", values="boundary_accuracy")
    out["rob.boundary"] = {**measure.ordering(bnd, ["RED", "softmax MoE"]), "task": "Task 1",
                           "split": "iid (the paper's protocol)"}
    out["mod.plug_in"] = {**plug_in(t, "Task 1", cfg.stable_tol), "extensions": {"MNIST": plug_in(t, "MNIST", cfg.stable_tol)}}
    rk = t["rank"].pivot_table(index=["seed", "rank divisor"], columns="task", values="accuracy")
    seeds = sorted(t["rank"]["seed"].unique())
    per_seed = [{f"d/{k}": [float(rk.loc[(s, k), "Task 1"]), float(rk.loc[(s, k), "Task 2"])] for k in cfg.ranks}
                for s in seeds]
    out["abl.rank"] = {"value": {f"d/{k}": [float(rk.xs(k, level=1)[task].mean()) for task in ("Task 1", "Task 2")]
                                 for k in cfg.ranks}, "per_seed": per_seed, "measure": "RED accuracy [Task 1, Task 2]",
                       "split": "iid (the paper's protocol)"}
    out["abl.no_residual"] = {
        **_drop(t["no_residual"], methods.NO_RESIDUAL),
        "measure": "RED minus the same experts and router with softmax gating", "split": "iid (the paper's protocol)",
        "extensions": {"the paper's reading: RED minus the softmax MoE baseline": _drop(t["no_residual"], "softmax MoE"),
                       **({"RED minus the released code's MoE (a gate over its logit experts)":
                           _drop(t["no_residual"], methods.CODE_MOE)} if has_code_moe(t["no_residual"]) else {})}}
    out |= cost_claims(t["parameter_cost"], t["stage_times"], cold_peaks(t), cfg.backbone)
    return out


def cold_peaks(t: dict[str, pd.DataFrame]) -> pd.Series:
    """Each page's peak memory in its last cold run, GiB (the Speed page's value; empty where none was sampled)."""
    return t["cold_peaks"].set_index("page")["GiB"] if "cold_peaks" in t else pd.Series(dtype=float)


def own_stages_words(epochs: pd.DataFrame | None) -> str:
    """The stages the page's studies trained (or reloaded) themselves, in words: how many, each task's rate and
    patience, and how many ended at their cap instead of by patience."""
    if epochs is None or epochs.empty:
        return "none recorded"
    per_task = epochs.groupby("task", sort=False).agg(lr=("lr", "first"), patience=("patience", "first"))
    at_cap = int(ended_at_cap(epochs).sum())
    return (f"{len(epochs)} stages (" + ", ".join(f"{r.Index} at lr {rate(r.lr)}, patience {int(r.patience)}"
                                                  for r in per_task.itertuples())
            + f"); {at_cap} ended at their cap instead of by patience")


def misrouting_words(at_end: pd.Series) -> str:
    """How far RED lands from the global head (which does not route) with every input sent to a random wrong expert,
    on Task 1 and MNIST, with the softmax MoE beside it (`at_end`: mean accuracy by task, perturbation, method at
    each perturbation's strongest setting)."""
    kind, parts = "misrouted (random expert)", []
    for i, task in enumerate(("Task 1", "MNIST")):
        red, base, moe = (at_end[(task, kind, m)] for m in ("RED", "global head", "softmax MoE"))
        where = "below" if red < base else "above"
        head = "the global head, which does not route," if i == 0 else "it"
        parts.append(f"{abs(base - red):.3f} {where} {head} on {task} ({red:.3f} against {base:.3f}; "
                     f"the softmax MoE {moe:.3f})")
    return "With every input sent to a random wrong expert, RED answers " + " and ".join(parts) + "."


def found(cfg: RobustnessConfig, t: dict[str, pd.DataFrame], v: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `rb_*`; `t1`/`mn` for Task 1/MNIST)."""
    paper, sw = load_claims(), t["sweep"]
    drops = mean_drop(sw).groupby(["task", "method"])["lost"].mean()
    end = sw[sw["strength"] == sw.groupby("perturbation")["strength"].transform("max")]
    at_end = end.groupby(["task", "perturbation", "method"])["accuracy"].mean()
    clean = sw[sw["perturbation"] == "none"].groupby(["task", "method"])["accuracy"].mean()
    out: dict[str, object] = {"rb_misrouting": misrouting_words(at_end)}
    for task, k in (("Task 1", "t1"), ("MNIST", "mn")):
        e, entry = at_end.loc[task], plug_in(t, task, cfg.stable_tol)
        add = t["added"][(t["added"]["task"] == task) & t["added"]["system"].str.startswith("first")]
        val = entry["value"]
        out |= {f"rb_{k}_lost_red": drops[(task, "RED")], f"rb_{k}_lost_moe": drops[(task, "softmax MoE")],
                f"rb_{k}_clean_global": clean[(task, "global head")], f"rb_{k}_clean_red": clean[(task, "RED")],
                f"rb_{k}_strongest": "; ".join(f"{kind} RED {e[(kind, 'RED')]:.3f} vs MoE {e[(kind, 'softmax MoE')]:.3f}"
                                               for kind in perturbation.PERTURBATIONS),
                f"rb_{k}_strongest_global": e[("flattened", "global head")],
                f"rb_{k}_removal": moves(val["removal: largest change on other domains"]),
                f"rb_{k}_moe_removal": moves(entry["moe_removal"]),
                f"rb_{k}_replacement": moves(val["replacement: largest change on other domains"]),
                f"rb_{k}_moe_replacement": moves(entry["moe_replacement"]),
                f"rb_{k}_without_last": add[add["domain"] == add["domain"].iloc[-1]]["accuracy"].mean(),
                f"rb_{k}_addition": moves(val["addition: largest difference to all at once"]),
                f"rb_{k}_identical": "yes" if entry["identical_after_addition"] else "no",
                # the ledger's rule (on Task 1 its verdict of the claim): at the ceiling "untestable here"
                f"rb_{k}_plug_in": verdict(paper["mod.plug_in"], entry)}
    bnd = t["boundary"].groupby("method")["boundary_accuracy"].mean()
    rk = t["rank"].groupby(["task", "rank divisor"])["accuracy"].mean()
    nr = t["no_residual"].groupby(["task", "method"])["accuracy"].mean()
    c = t["parameter_cost"].set_index("backbone")
    here, qwen, peaks = c.iloc[0], c.loc["Qwen3-0.6B shape"], cold_peaks(t)
    return out | {
        "rb_train_seeds": seeds_words(cfg.train_seeds), "rb_seeds": seed_list(cfg.seeds), "rb_boundary_red": bnd["RED"],
        "rb_boundary_moe": bnd["softmax MoE"], "rb_stable_tol": cfg.stable_tol,
        "rb_rank": "; ".join(f"d/{k}: Task 1 {rk[('Task 1', k)]:.3f}, Task 2 {rk[('Task 2', k)]:.3f}" for k in cfg.ranks),
        "rb_paper_rank": ", ".join(f"{k} {p[0]}/{p[1]}" for k, p in paper["abl.rank"]["paper"].items()),
        **{f"rb_{k}_no_residual": small(nr[(task, "RED")] - nr[(task, methods.NO_RESIDUAL)], sign=True) for k, task in
           (("t1", "Task 1"), ("t2", "Task 2"))},
        **{f"rb_{k}_red_minus_moe": small(nr[(task, "RED")] - nr[(task, "softmax MoE")], sign=True) for k, task in
           (("t1", "Task 1"), ("t2", "Task 2"))},
        "rb_code_moe_drops": code_moe_drops(t["no_residual"]),
        "rb_paper_t1_drop": paper["abl.no_residual"]["paper"]["task1_drop"],
        "rb_paper_t2_drop": paper["abl.no_residual"]["paper"]["task2_drop"],
        "rb_qwen_share": qwen["RED share of backbone"],
        "rb_router_compute": here["router share of compute"], "rb_moe_ratio": qwen["MoE / RED expert parameters"],
        "rb_paper_formula": qwen[PAPER_FORMULA],
        "rb_peak": f"{peaks.max():.2f} GiB, {peaks.idxmax().replace('_', ' ')}" if len(peaks) else "not measured",
        "rb_n_claims": len(v), "rb_tally": range_tables.verdict_tally(v),
        "rb_own_stages": own_stages_words(t.get("epochs")),
        **verdict_keys("rb", {"eff.train_time": "not measured", "eff.peak_memory": "not measured"} | v),
    }


def cost_claims(c: pd.DataFrame, times: pd.DataFrame, peaks: pd.Series, backbone: str) -> dict[str, dict]:
    """eff.*: parameter and compute shares (judged on Qwen3-0.6B's shape, exact from its configuration), the
    training time the pages' runs recorded (`times`) and their peak memory in their last cold runs (`peaks`, GiB per
    page: the bench's `cold_peaks`), on this machine's CPU with the embedded backbone."""
    c = c.set_index("backbone")
    here, qwen = c.iloc[0], c.loc["Qwen3-0.6B shape"]
    exact = "exact (counted from the shapes, no seed)"
    out = {"eff.params": measure.bound([qwen["RED share of backbone"]], 0.0, 0.01,
                                       measure="RED's added parameters as a share of the backbone's, on Qwen3-0.6B's "
                                               "shape",
                                       embedded_backbone=float(here["RED share of backbone"]), spread=exact),
           "eff.router_flops": measure.bound([here["router share of compute"]], 0.0, 0.005, backbone=backbone,
                                             qwen3_0_6b_shape=float(qwen["router share of compute"]), spread=exact)}
    ratio = float(qwen["MoE / RED expert parameters"])
    paper_ratio = float(qwen[PAPER_FORMULA]) if PAPER_FORMULA in qwen else None  # tables from before this column
    out["eff.red_vs_moe_params"] = measure.order(
        [ratio >= 10], ratio >= 10, value=ratio,
        measure="the MoE's expert parameters over RED's, above 1 where RED's are fewer, on Qwen3-0.6B's shape",
        claim_needs="a ratio of at least 10 (one order of magnitude)",
        embedded_backbone=float(here["MoE / RED expert parameters"]),
        extensions={"the paper's own count, d·C against d·r + r·C (Qwen3-0.6B's shape)": measure.order(
            [paper_ratio >= 10], paper_ratio >= 10, value=paper_ratio)} if paper_ratio is not None else {})
    t1 = times[times["page"] == "task1_addition"]
    if len(t1):
        runs = int(t1["runs"].iloc[0])
        s = t1.set_index("stage")["seconds"]
        part = lambda *k: float(s.reindex(list(k)).fillna(0).sum()) / runs  # noqa: E731
        value = {"total_hours": float(t1["seconds"].sum()) / runs / 3600,
                 "base_hours": part("prefix", "stage1", "features") / 3600, "experts_minutes": part("expert") / 60,
                 "router_red_hours": part("router", "residual") / 3600}
        out["eff.train_time"] = {"value": value, "per_seed": [value], "runs_timed": runs,
                                 "measure": "compute per seed and setting of Task 1 (every stage's recorded training "
                                            "seconds), this machine's CPU, the embedded backbone (the paper: Qwen3-0.6B "
                                            "on an RTX 3060 Ti)",
                                 "git_commit": t1["git_commit"].iloc[0]}
    if len(peaks):
        out["eff.peak_memory"] = measure.bound([float(peaks.max())], 0.0, 6.5, measure="GiB, the largest page's peak "
                                               "memory (its kernel and workers at once, in its last cold full-profile "
                                               "run) on CPU (the paper: accelerator memory)", page=str(peaks.idxmax()),
                                               spread="one measurement (a cold run of each page)",
                                               per_page={k: float(v) for k, v in peaks.items()})
    return out
