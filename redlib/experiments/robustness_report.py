"""The robustness page's tables, claims and findings: accuracy lost to routing noise, the plug-in verdict, the
ablations against the paper's numbers (the measurements themselves are `robustness.py`'s)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core import measure
from ..core.claims import load_claims, order_verdict
from ..red import cost, methods, routing
from . import ranges
from .robustness import ROUTED, RobustnessConfig


def rank_table(rank: pd.DataFrame) -> pd.DataFrame:
    """RED accuracy per rank divisor and task (mean and sd over seeds), beside the paper's (d/2, d/4, d/8)."""
    out = rank.pivot_table(index=["rank divisor", "rank"], columns="task", values="accuracy", aggfunc=["mean", "std"])
    out.columns = [f"{task} {stat}" for stat, task in out.columns]
    paper = load_claims()["abl.rank"]["paper"]
    for i, task in enumerate(("Task 1", "Task 2")):
        out[f"{task} paper"] = [paper.get(f"d/{k}", [None, None])[i] for k, _ in out.index]
    return out[sorted(out.columns)]


def no_residual_table(nr: pd.DataFrame) -> pd.DataFrame:
    """Accuracy of RED, its no-residual ablation and the MoE baseline per task, and both readings of the drop."""
    acc = nr.pivot_table(index="method", columns="task", values="accuracy", sort=False)
    paper = load_claims()["abl.no_residual"]["paper"]
    drops = pd.DataFrame({"drop: RED minus the ablation": acc.loc["RED"] - acc.loc[methods.NO_RESIDUAL],
                          "drop: RED minus the MoE baseline (the paper's reading)": acc.loc["RED"] - acc.loc["softmax MoE"],
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
    return measure.order(holds, all(holds), value=value, tolerance=tol, task=task,
                         moe_removal=float(elsewhere(t["removed"], "softmax MoE").max()),
                         moe_replacement=float(elsewhere(t["replaced"], "softmax MoE").max()),
                         identical_after_addition=bool(identical.all()))


DROP_KEYS = {"task1_drop": "Task 1", "task2_drop": "Task 2"}  # the claims file's keys of abl.no_residual


def _drop(nr: pd.DataFrame, other: str) -> dict[str, Any]:
    """RED's accuracy minus `other`'s on each task, paired by seed: value (means) and per seed, keyed as the claim."""
    wide = {key: nr[nr["task"] == task].pivot_table(index="seed", columns="method", values="accuracy")
            for key, task in DROP_KEYS.items()}
    diff = {key: w["RED"] - w[other] for key, w in wide.items()}
    seeds = diff["task1_drop"].index
    return {"value": {k: float(v.mean()) for k, v in diff.items()},
            "per_seed": [{k: float(v.loc[s]) for k, v in diff.items()} for s in seeds]}


def claims(cfg: RobustnessConfig, t: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """Every rob.*, mod.*, abl.* and eff.* claim: judged on Task 1 under the paper's protocol (and Task 2 where the
    paper gives both); MNIST beside it as an extension."""
    drops = mean_drop(t["sweep"]).pivot_table(index=["task", "seed"], columns="method", values="lost")

    def noise(task: str) -> dict:
        d = drops.loc[task]
        return {**measure.ordering(-d, ["RED", "softmax MoE"]), "value": {m: float(d[m].mean()) for m in ROUTED},
                "measure": "accuracy lost, mean over every perturbation and strength (lower is more graceful)",
                "task": task}

    out = {"rob.routing_noise": {**noise("Task 1"), "extensions": {"MNIST": noise("MNIST")}}}
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
        "extensions": {"the paper's reading: RED minus the softmax MoE baseline": _drop(t["no_residual"], "softmax MoE")}}
    out |= cost.claims(t["parameter_cost"], t["stage_times"], cfg.backbone)
    return out


def findings(cfg: RobustnessConfig, t: dict[str, pd.DataFrame], v: dict[str, str]) -> str:
    """The page's conclusions in words, from its tables and the ledger's verdicts."""
    paper, sw = load_claims(), t["sweep"]
    drops = mean_drop(sw).groupby(["task", "method"])["lost"].mean()
    end = sw[sw["strength"] == sw.groupby("perturbation")["strength"].transform("max")]
    at_end = end.groupby(["task", "perturbation", "method"])["accuracy"].mean()
    lines = ["- **Routing noise** (mean accuracy lost over every perturbation and strength): " + "; ".join(
        f"{task}: RED {drops[(task, 'RED')]:.3f}, softmax MoE {drops[(task, 'softmax MoE')]:.3f}, the MoE's experts "
        f"under RED's router {drops[(task, ROUTED[2])]:.3f}" for task in ("Task 1", "MNIST"))
        + f". The claim that RED degrades more gracefully **{v['rob.routing_noise']}** on Task 1."]
    base = sw[sw["perturbation"] == "none"].groupby(["task", "method"])["accuracy"].mean()
    lines.append(f"- Clean, the global head alone answers {base[('Task 1', 'global head')]:.3f} of Task 1's test questions "
                 f"(RED {base[('Task 1', 'RED')]:.3f}) and {base[('MNIST', 'global head')]:.3f} of MNIST's "
                 f"(RED {base[('MNIST', 'RED')]:.3f})."
                 + (" Read Task 1 with care: on its iid split the base already answers almost everything, so RED's "
                    "residuals have little to correct and its robustness there is largely its base's, while the MoE's "
                    "experts only know their own range; MNIST, where the residuals carry weight, is the more telling test."
                    if base[("Task 1", "global head")] >= 0.95 else ""))
    for task in ("Task 1", "MNIST"):
        e = at_end.loc[task]
        lines.append(f"- {task} at the strongest setting of each perturbation: " + "; ".join(
            f"{kind} RED {e[(kind, 'RED')]:.3f} vs MoE {e[(kind, 'softmax MoE')]:.3f}"
            for kind in routing.PERTURBATIONS) + f" (global head {e[('flattened', 'global head')]:.3f}).")
    bnd = t["boundary"].groupby("method")["boundary_accuracy"].mean()
    lines.append(f"- On range-boundary sums (Task 1, iid) RED reaches {bnd['RED']:.3f} and the softmax MoE "
                 f"{bnd['softmax MoE']:.3f}: **{v['rob.boundary']}** (a tie is not 'more accurate').")
    plug = {task: plug_in(t, task, cfg.stable_tol) for task in ("Task 1", "MNIST")}
    for task, entry in plug.items():
        val = entry["value"]
        add = t["added"][(t["added"]["task"] == task) & t["added"]["system"].str.startswith("first")]
        late = add[add["domain"] == add["domain"].iloc[-1]]["accuracy"].mean()
        lines.append(
            f"- **Modularity on {task}**: removing one expert moves RED's accuracy on the other domains by at most "
            f"{val['removal: largest change on other domains']:.3f} (MoE: {entry['moe_removal']:.3f}); replacing one by "
            f"an expert trained with another seed, by at most {val['replacement: largest change on other domains']:.3f} "
            f"(MoE: {entry['moe_replacement']:.3f}). Deployed without its last expert, RED answers {late:.3f} of that "
            f"domain's inputs; adding the expert later (trained alone) and retraining only the router gives "
            + ("exactly the all-at-once system (bit-identical weights)" if entry["identical_after_addition"] else
               f"a system within {val['addition: largest difference to all at once']:.3f} of the all-at-once one")
            + ", the backbone and the earlier experts untouched.")
    on_mnist = plug["MNIST"]
    lines.append(f"- The plug-in claim (changes within {cfg.stable_tol} on the domains not touched) "
                 f"**{v['mod.plug_in']}** on Task 1; on MNIST (extension) "
                 f"**{order_verdict(on_mnist['per_seed'], on_mnist['mean_holds'])}**.")
    rk = t["rank"].groupby(["task", "rank divisor"])["accuracy"].mean()
    lines.append("- **Rank ablation** (RED, iid): " + "; ".join(
        f"d/{k}: Task 1 {rk[('Task 1', k)]:.3f}, Task 2 {rk[('Task 2', k)]:.3f}" for k in cfg.ranks)
        + " (paper: " + ", ".join(f"{k} {p[0]}/{p[1]}" for k, p in paper["abl.rank"]["paper"].items())
        + f"): **{v['abl.rank']}**.")
    nr = t["no_residual"].groupby(["task", "method"])["accuracy"].mean()
    lines.append("- **No residual path**: RED's own experts and router with softmax gating lose " + ", ".join(
        f"{nr[(task, 'RED')] - nr[(task, methods.NO_RESIDUAL)]:+.3f} ({task})" for task in ("Task 1", "Task 2"))
        + "; the paper's reading (RED minus the MoE baseline) gives " + ", ".join(
        f"{nr[(task, 'RED')] - nr[(task, 'softmax MoE')]:+.3f} ({task})" for task in ("Task 1", "Task 2"))
        + f" (paper: {paper['abl.no_residual']['paper']['task1_drop']} and "
          f"{paper['abl.no_residual']['paper']['task2_drop']}): **{v['abl.no_residual']}**.")
    c = t["parameter_cost"].set_index("backbone")
    here, qwen = c.iloc[0], c.loc["Qwen3-0.6B shape"]
    lines.append(
        f"- **Cost**: RED's residuals and router add {qwen['RED share of backbone']:.2%} of Qwen3-0.6B's parameters "
        f"({here['RED share of backbone']:.2%} of the embedded backbone's; claim < 1%: **{v['eff.params']}**); the "
        f"router costs {here['router share of compute']:.3%} of the backbone's compute per question (claim < 0.5%: "
        f"**{v['eff.router_flops']}**); a full-rank MoE expert has {qwen['MoE / RED expert parameters']:.2f} times the "
        f"parameters of a RED residual at r = d/4 (claim: one to two orders of magnitude, **{v['eff.red_vs_moe_params']}**"
        "; the paper's complexity counts RED experts as d r + r C, but the hidden-space residual it defines is d -> r -> d).")
    if "eff.train_time" in v:
        lines.append(f"- Time and memory on this machine's CPU (from the bench): training time claim "
                     f"**{v['eff.train_time']}** (another backbone and machine than the paper's), peak memory under "
                     f"6.5 GB **{v.get('eff.peak_memory', 'not measured')}**.")
    lines.append(f"- The {len(v)} claims on this page (value claims with tolerance 0.05): {ranges.verdict_tally(v)}.")
    return "\n".join(lines)
