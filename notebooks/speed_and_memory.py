# ---
# jupyter:
#   jupytext:
#     formats: notebooks//py:percent,book//ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Speed and memory
#
# The paper reports 3-4 hours of training on an RTX 3060 Ti and under 6.5 GB of memory. This page
# shows what the companion's pipeline costs on the machine that ran `make bench`
# (`python -m redlib bench`, written to `results/bench/bench.json`): every number below is read
# from that file, measured over several repetitions (median, with min-max).
#
# **Why the frozen-prefix cache helps.** With $L$ blocks of which the top $k$ train, a naive
# training step runs all $L$ blocks forward and the top $k$ backward (about $L + 2k$ block-forwards),
# while the cached step runs only the top $k$ forward and backward (about $3k$): the speed-up is
# bounded by about $(L + 2k) / 3k$, 1.67x for the embedded backbone ($L = 6$, $k = 2$) and 5.3x for
# Qwen3-0.6B ($L = 28$).

# %% tags=["parameters", "remove-cell"]
profile = "full"  # unused: the bench file is the same for every profile
seed = 0  # unused: this page trains nothing
device = "cpu"  # unused: this page trains nothing
results_dir = "results"  # the bench file is <results_dir>/bench/bench.json

# %% tags=["hide-input"]
import json

import pandas as pd
from IPython.display import Markdown, display

from redlib import plots
from redlib.config import BenchPageConfig
from redlib.results import Results
from redlib.runtime import resolve_path

cfg = BenchPageConfig.from_namespace(globals())
results = Results(cfg)
path = resolve_path(cfg.results_dir) / "bench" / "bench.json"
bench = json.loads(path.read_text()) if path.exists() else None
if bench is None:
    display(Markdown(f"No benchmark has been run yet (`{path.name}` is missing): run `make bench`."))
else:
    m = bench["machine"]
    display(Markdown(f"Measured on {m['platform']} ({m['cpu_count']} CPUs, {m['torch_threads']} torch threads), commit "
                     f"`{bench['git_commit'][:12]}`{' - smoke mode: tiny sizes, one repetition' if bench['smoke'] else ''}."))


# %% tags=["hide-input"]
def span(t: dict) -> str:
    """'median (min-max)' of a timing entry, in seconds."""
    return f"{t['median']:.3f} ({t['min']:.3f}-{t['max']:.3f})"


targets = []


def target(what: str, measured: float, goal: float, higher_is_better: bool, unit: str) -> None:
    """Record whether a measured number meets its target, and by how much it misses."""
    met = measured >= goal if higher_is_better else measured <= goal
    gap = "" if met else f"missed by {abs(measured - goal):.2f} {unit} ({abs(measured - goal) / goal:.0%})"
    targets.append({"target": what, "goal": f"{'>=' if higher_is_better else '<='} {goal} {unit}",
                    "measured": f"{measured:.2f} {unit}", "met": "yes" if met else "no", "gap": gap})


if bench and bench.get("errors"):
    display(Markdown("**Steps of this bench run that failed:** " + "; ".join(f"{k}: {v}" for k, v in bench["errors"].items())))
if bench and "prefix_cache" in bench:
    pc = bench["prefix_cache"]
    rows = [pc["embedded"], *pc["qwen_shaped"]]
    cache_table = pd.DataFrame([{
        "backbone": r["backbone"], "blocks L": r["blocks"], "trained k": r["k"], "samples": r["samples"],
        "naive epoch s": span(r["naive_epoch"]), "cached epoch s": span(r["cached_epoch"]),
        "prefix once s": round(r["prefix_seconds_once"], 3), "speed-up": round(r["speedup"], 2),
        "bound (L+2k)/3k": round(r["bound"], 2), "share of bound": f"{r['speedup'] / r['bound']:.0%}"} for r in rows])
    results.table("prefix_cache", cache_table)
    target("frozen-prefix speed-up, embedded backbone", pc["embedded"]["speedup"], bench["targets"]["embedded_cache_speedup"], True, "x")
    deepest = max(pc["qwen_shaped"], key=lambda r: r["blocks"])
    if deepest["blocks"] == 28:
        target("frozen-prefix speed-up, Qwen3-0.6B-shaped (28 blocks)", deepest["speedup"], bench["targets"]["qwen_cache_speedup"], True, "x")
    display(Markdown("### Frozen-prefix cache vs naive training (one stage-1 epoch)\n\nThe Qwen3-0.6B-shaped stacks "
                     f"keep its depth and shape ratios at reduced width ({pc['qwen_shape']}) with random weights, to fit a CPU budget."))
    display(plots.styled(cache_table, hide_index=True))

# %% tags=["hide-input"]
if bench and "features_cache" in bench and "throughput" in bench:
    fc, tp = bench["features_cache"], bench["throughput"]
    display(Markdown(f"### Experts and routers on cached pooled features\n\nOne router epoch over {fc['samples']} questions: "
                     f"{span(fc['cached_epoch'])} s on cached features, {span(fc['recompute_epoch'])} s recomputing the "
                     f"frozen backbone each step: **{fc['speedup']:.0f}x** faster."))
    thr = pd.DataFrame([{"method": k, "queries per second": round(v["queries_per_second"]), "seconds per batch": span(v)}
                        for k, v in tp["methods"].items()]
                       + [{"method": "backbone forward (embedded)", "queries per second": round(tp["backbone"]["queries_per_second"]),
                           "seconds per batch": span(tp["backbone"])}])
    results.table("throughput", thr)
    display(Markdown(f"### Inference throughput\n\nRED's head (router + five residuals + classifier) costs "
                     f"{tp['red_extra_cost_vs_backbone']:.2%} of a backbone forward per query; its residuals and router "
                     f"hold {tp['params']['red_residuals_and_router']:,} parameters against the backbone's "
                     f"{tp['params']['backbone']:,} and the MoE's experts and router {tp['params']['moe_experts_and_router']:,}."))
    display(plots.styled(thr, hide_index=True))

# %% tags=["hide-input"]
if bench:
    nb_rows = []
    for prof, block in bench.get("notebooks", {}).items():
        for name, t in block["per_notebook"].items():
            nb_rows.append({"profile": prof, "notebook": name, "cold wall s": round(t["wall_seconds"], 1),
                            "peak kernel memory MiB": t["peak_rss_mb"]})
        total = block["total_seconds"]
        if prof == "full" and block["book_build_seconds"] is not None:
            target("whole full-profile book", total / 60, bench["targets"]["full_book_minutes"], False, "min")
        if prof == "smoke" and "unit_tests_seconds" in bench and block["book_build_seconds"] is not None:
            # the test command = unit tests + smoke notebooks + strict build (+ nbval re-executes them, about as long again)
            smoke_total = bench["unit_tests_seconds"] + 2 * sum(t["wall_seconds"] for t in block["per_notebook"].values()) \
                + block["book_build_seconds"]
            target("whole smoke test command (estimate: notebooks counted twice for nbval)", smoke_total / 60,
                   bench["targets"]["smoke_test_minutes"], False, "min")
    display(Markdown("### Notebooks, cold (fresh results folder and cache)"))
    if "full" not in bench["notebooks"]:
        display(Markdown("**This bench run did not time the full profile cold** (`--profiles` "
                         f"{','.join(bench.get('profiles_timed', []))}): the whole-book target is not measured here; "
                         "`make bench` with its defaults times it."))
    if nb_rows:
        nbt = pd.DataFrame(nb_rows)
        results.table("notebooks", nbt)
        peak = nbt["peak kernel memory MiB"].max() / 1024
        target("peak kernel memory of any notebook", peak, bench["targets"]["peak_rss_gib"], False, "GiB")
        display(plots.styled(nbt, precision=1, hide_index=True))
    builds = {p: b["book_build_seconds"] for p, b in bench["notebooks"].items() if b["book_build_seconds"] is not None}
    if builds:
        display(Markdown("Strict HTML build of the executed notebooks: " + ", ".join(f"{v:.0f} s ({k})" for k, v in builds.items()) + "."))

# %% [markdown]
# ## Targets

# %% tags=["hide-input"]
if bench and targets:
    tt = pd.DataFrame(targets)
    results.table("targets", tt)
    display(plots.styled(tt, hide_index=True).map(lambda v: {"yes": "background-color: #c8e6c9",
                                                               "no": "background-color: #ffcdd2"}.get(v, ""), subset=["met"]))
if bench and "profile" in bench:
    display(Markdown(f"### Where the time goes\n\nThe slowest notebook timed in this run was "
                     f"`{bench['profile']['slowest_notebook']}`; the profile below is of {bench['profile']['what']}: the notebook "
                     "with the most training per run (a backbone stage and 17 modules), top functions by cumulative time:"))
    print("\n".join(bench["profile"]["cprofile"].strip().splitlines()[:40]))

# %% tags=["hide-input"]
results.finish()
display(Markdown(results.provenance_markdown()))
