"""The book's answer, for the intro's first screen: RED against the softmax MoE wherever there is room to rank, and
why most claims that miss lie where they do. Everything is read from the result files and recorded parameters.

A setting has room to rank when RED's and the MoE's accuracies are not both at the ceiling (0.995). Each row is the
paired difference RED − softmax MoE over the setting's seeds, judged by the ledger's rule for an order
(`claims.pair_outcome`), beside the paper's gap where the paper reports one.
"""

from __future__ import annotations

import os
import pandas as pd

from ..core.claims import CEILING, load_claims, pair_outcome, small
from .results import read
from .words import reader

MOE = "softmax MoE"
# per page: how its runs are named in words, and the paper's RED and MoE claim ids (a per-case claim: the case)
PAGES = {
    "task2_mixed": ("Task 2", ("t2.red.acc", "t2.moe.acc", None)),
    "task1_addition": ("Task 1", ("t1.red.acc", "t1.moe.acc", None)),
    "step_decomposition": ("Step decomposition, true programs", ("sd.red.acc", "sd.moe.acc", "all")),
    "mnist_label5": ("MNIST", ("mn.red.acc", "mn.moe.acc", None)),
}
OUTCOME = {"above": "RED ahead", "below": "MoE ahead", "tie": "tie"}
TRUE_RANGE, ORACLE = "RED (true range)", "oracle experts"  # each method routed by the true domain
UNSEEN = "unseen test texts"  # Task 2's test texts that train does not hold: a row of their own
ONE_SEED = "one seed: not judged"  # a single paired difference has no spread to judge it against


def _accuracies(page: str, profile: str, root: str | os.PathLike) -> pd.DataFrame | None:
    """One row per run (setting) and seed: RED's and the MoE's test accuracy, each routed by the true domain where the
    page scores it, and the router's test accuracy; Task 2's claims' run again on its unseen test texts, as a run of
    its own (None: the page has no results)."""
    res = read(page, profile, root)
    if not res.exists:
        return None
    if page == "step_decomposition":
        ex = res.table("execution")
        df = ex[(ex["programs"] == "true programs") & (ex["steps"].astype(str) == "all")].rename(
            columns={"routing": "method"})
    else:
        df = res.table("overall")
    df = df.assign(run=df["run"] if "run" in df else "")
    df = df[df["method"].isin(["RED", MOE, TRUE_RANGE, ORACLE])]
    if "unseen_accuracy" in df:  # the claims' run, scored on the test texts train does not hold
        first = df[df["run"] == df["run"].iloc[0]]
        df = pd.concat([df, first.assign(run=f"{first['run'].iloc[0]}, {UNSEEN}", accuracy=first["unseen_accuracy"])])
    acc = df.pivot_table(index=["run", "seed"], columns="method", values="accuracy", sort=False)
    router = res.table("router_accuracy") if (res.dir / "router_accuracy.csv").exists() else None
    if router is not None:
        router = router[router["split_part"] == "test"].assign(run=router["run"] if "run" in router else "")
        acc["router"] = router.set_index(["run", "seed"])["router_accuracy"]
    return acc.reset_index()


def _paper_gap(ids: tuple[str, str, str | None]) -> float:
    claims = load_claims()
    red, moe = (claims[i]["paper"] for i in ids[:2])
    if ids[2] is not None:
        red, moe = red[ids[2]], moe[ids[2]]
    return float(red) - float(moe)


def _settings(profile: str, root: str | os.PathLike):
    """Each page's settings in order, read once: (page, its words, its claim ids, its claims' run, the run, the
    run's seeds x (RED, MoE) accuracies, whether both sit at the ceiling)."""
    for page, (name, ids) in PAGES.items():
        acc = _accuracies(page, profile, root)
        for run, g in ([] if acc is None else acc.groupby("run", sort=False)):
            yield page, name, ids, acc["run"].iloc[0], run, g, min(g["RED"].mean(), g[MOE].mean()) >= CEILING


def red_vs_moe(profile: str = "full", root: str | os.PathLike = "results") -> tuple[pd.DataFrame, list[str]]:
    """Every setting with room to rank: RED − softmax MoE (mean and sd of the paired differences), the seeds, the
    ledger's reading, and the paper's gap (on the claims' setting, the first run of a page); and the settings left
    out, RED and the MoE both at the ceiling."""
    rows, left_out, shown = [], [], set()
    for page, name, ids, claims_run, run, g, ceiling in _settings(profile, root):
        if ceiling:
            left_out.append(f"{name}, {reader(run)}" if run else name)
            continue
        outcome, gap, sd = pair_outcome(g["RED"].tolist(), g[MOE].tolist())
        # the paper's gap beside the page's first row shown (its claims' setting, or the paper's, named)
        paper = "—" if page in shown else f"{_paper_gap(ids):+.3f}" + ("" if run == claims_run else f" ({claims_run})")
        rows.append({"setting": f"{name}, {reader(run)}" if run else name, "page": page,
                     "RED − softmax MoE": gap, "sd": sd, "seeds": len(g),
                     "by the ledger's rule": OUTCOME[outcome] if len(g) > 1 else ONE_SEED,
                     "paper's gap": paper, **_routing(g)})
        shown.add(page)
    return pd.DataFrame(rows), left_out


def _routing(g: pd.DataFrame) -> dict[str, float]:
    """Why RED and the MoE land where they do, over a setting's seeds: the router's test accuracy, and how far each
    method sits from itself routed by the true domain (RED from RED with the true range, the MoE from the oracle
    experts); NaN where the page does not score it."""
    mean = lambda col: float(g[col].mean()) if col in g and g[col].notna().any() else float("nan")  # noqa: E731
    return {"router": mean("router"), "RED − true range": mean("RED") - mean(TRUE_RANGE),
            "MoE − oracle": mean(MOE) - mean(ORACLE)}


def display_table(df: pd.DataFrame) -> pd.DataFrame:
    """`red_vs_moe` as the intro shows it: the difference with its sd, the seeds, the ledger's reading, the paper's."""
    def pm(gap: float, sd: float) -> str:
        return small(gap, sign=True) + ("" if sd != sd else f" ± {small(sd)}")

    def num(x: float, sign: bool = False) -> str:  # "—": not scored on that page; an exact zero: "equal"
        return "—" if x != x else "equal" if sign and x == 0 else small(x, sign=sign)

    return pd.DataFrame({"setting": df["setting"], "RED − softmax MoE": [pm(g, s) for g, s in zip(df["RED − softmax MoE"], df["sd"])],
                         "seeds": df["seeds"], "by the ledger's rule": df["by the ledger's rule"],
                         "paper's gap": df["paper's gap"], "router": [num(x) for x in df["router"]],
                         "RED − true range": [num(x, True) for x in df["RED − true range"]],
                         "MoE − oracle": [num(x, True) for x in df["MoE − oracle"]]})


def answer_words(df: pd.DataFrame, left_out: list[str]) -> str:
    """What the table adds up to, in one sentence."""
    if df.empty:
        return "No setting with room to rank has been measured yet."
    n = df["by the ledger's rule"].value_counts()
    paper = [float(v.split()[0]) for v in df["paper's gap"] if v != "—"]
    ceiling = (f" Left out, RED and the MoE both at the ceiling (0.995 or above): {'; '.join(left_out)}." if left_out
               else "")
    single = int(n.get(ONE_SEED, 0))
    judged = len(df) - single
    one = (f"{single} setting{'s' if single != 1 else ''} ran on one seed: a difference there has no spread to be judged "
           "against") if single else ""
    paper_words = f"the paper reports RED ahead by {min(paper):+.3f} to {max(paper):+.3f} on these tasks"
    if not judged:
        return f"Every setting with room to rank ({one}), so none is judged; {paper_words}.{ceiling}"
    return (f"Wherever there is room to rank on several seeds ({judged} setting{'s' if judged != 1 else ''}), RED is ahead "
            f"of the softmax MoE in {n.get('RED ahead', 0)}, behind it in {n.get('MoE ahead', 0)} and tied in "
            f"{n.get('tie', 0)} by the ledger's rule (a paired difference 0.01 beyond its spread); {paper_words}."
            + (f" {one[0].upper()}{one[1:]}." if one else "") + ceiling)


def cause_words(df: pd.DataFrame) -> str:
    """Why RED and the MoE tie or part here, from the answer table: how well the routers route, how far each method
    sits from itself routed by the true domain, and where RED is ahead by the ledger's rule."""
    routed = df.dropna(subset=["router"])
    if routed.empty:
        return ""
    gaps = df[["RED − true range", "MoE − oracle"]].abs()
    paper = load_claims()["t1.router.acc"]["paper"][0]
    ahead = df[df["by the ledger's rule"] == OUTCOME["above"]]
    where = "; ".join(f"{r['setting']} ({small(r['RED − softmax MoE'], sign=True)})" for _, r in ahead.iterrows())
    return (f"Why: the routers here send {small(routed['router'].min())} to {small(routed['router'].max())} of test "
            f"inputs to their own expert (the paper's: about {paper:g}), and each method lands close to itself routed "
            f"by the true domain: RED within {small(gaps['RED − true range'].max())} of RED with the true range, the "
            f"MoE within {small(gaps['MoE − oracle'].max())} of the oracle experts. So the "
            "comparison is mostly between the two kinds of experts, residual corrections through the shared head "
            "against classifier experts. RED is ahead by the ledger's rule in "
            + (where if where else "no setting") + ".")


def misses_words(table: pd.DataFrame, seen: dict[str, float]) -> str:
    """Why the claims that do not hold miss: how many value claims lie above the paper's numbers and how many below
    (the ledger's `miss` column), and the share of test each task re-asks from training (`seen`)."""
    missed = table[table["verdict"] == "does not hold"]
    where = missed["miss"][missed["miss"] != ""].value_counts()
    other = len(missed) - int(where.sum())
    shares = ", ".join(f"{task} {share:.0%}" for task, share in seen.items())
    above = int(where.get("above", 0))
    return (f"Of the {len(missed)} claims that do not hold, {above} {'lies' if above == 1 else 'lie'} above the "
            f"paper's numbers, "
            f"{where.get('below', 0)} below and {where.get('both sides', 0)} on both sides"
            + (f"; {other} {'is an order or a bound' if other == 1 else 'are orders or bounds'}" if other else "")
            + (". Most misses lie above the paper's numbers" if where.get("above", 0) > where.get("below", 0)
               else ". The misses do not lie mostly above the paper's numbers")
            + f"; the arithmetic tests re-ask much of what training showed (test inputs seen in training: {shares}).")


def seen_shares(profile: str = "full", root: str | os.PathLike = "results") -> dict[str, float]:
    """The share of test inputs whose text train also holds, in each arithmetic task's claims' setting (first seed),
    from the data its recorded parameters generate."""
    from ..experiments import task1_addition, task2_mixed
    from ..experiments.ranges import seen_share
    from .paper_vs_code import recorded

    out: dict[str, float] = {}
    for page, frames in (("task1_addition", task1_addition.frames), ("task2_mixed", task2_mixed.frames)):
        cfg = recorded(page, profile, root)
        if cfg is not None:
            out[f"{PAGES[page][0]} ({cfg.settings[0].label})"] = seen_share(cfg, frames, cfg.settings[0])
    return out
