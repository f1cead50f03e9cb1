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
from redlib.bench import cprofile_table
from redlib.config import BenchPageConfig
from redlib.results import Results
from redlib.runtime import resolve_path
from redlib.task1 import STAGE_KINDS

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


def target(what: str, measured: float, goal: float, higher_is_better: bool, unit: str, judged: bool = True) -> None:
    """Record whether a measured number meets its target (or, when not judged, a reference point), and by how much."""
    met = measured >= goal if higher_is_better else measured <= goal
    gap = "" if met else f"missed by {abs(measured - goal):.2g} {unit} ({abs(measured - goal) / goal:.1%})"
    digits = 3 if abs(measured - goal) < 0.01 else 2  # enough digits to tell a near miss from a hit
    targets.append({"target": what, "goal": f"{'>=' if higher_is_better else '<='} {goal} {unit}",
                    "measured": f"{measured:.{digits}f} {unit}", "met": ("yes" if met else "no") if judged else
                    f"reference: {'yes' if met else 'no'}", "gap": gap})


if bench and bench.get("errors"):
    display(Markdown("**Steps of this bench run that failed:** " + "; ".join(f"{k}: {v}" for k, v in bench["errors"].items())))

# %% [markdown]
# ## Frozen-prefix cache vs naive training
#
# One epoch of stage-1 training (top 2 blocks + a 99-way head, AdamW as in the fit loop) over the same
# questions, with the cached prefix and with the full forward at every step. The target is judged at the
# micro-batch the pipeline trains with (Task 1's `batch_size`); the paper's micro-batch of 16 is shown
# for reference. The bound is approximate: it counts block computations only and takes a block's
# backward pass as twice its forward. The optimiser update of the trained blocks, the head and the
# per-step Python work cost the same in both paths and pull the ratio down, more so with small batches
# (more steps per epoch); a backward cheaper than two forwards, or the naive path's
# embedding and mask work, push it up. Measurements can land on either side of the bound.

# %% tags=["hide-input"]
if bench and "prefix_cache" in bench:
    pc = bench["prefix_cache"]
    rows = [*pc["embedded"], *pc["qwen_shaped"]]
    cache = pd.DataFrame([{
        "backbone": "embedded (MiniLM)" if r["backbone"] == "embedded" else "Qwen3-shaped", "blocks L": r["blocks"],
        "batch": r["batch"], "naive epoch s": r["naive_epoch"]["median"], "cached epoch s": r["cached_epoch"]["median"],
        "prefix once s": r["prefix_seconds_once"], "speedup": r["speedup"],
        "speedup_min": r["naive_epoch"]["min"] / r["cached_epoch"]["max"],
        "speedup_max": r["naive_epoch"]["max"] / r["cached_epoch"]["min"], "bound": r["bound"]} for r in rows])
    cache["share of bound"] = (cache["speedup"] / cache["bound"]).map("{:.0%}".format)
    results.table("prefix_cache", cache)
    pipeline = pc["pipeline_batch"]
    for r in pc["embedded"]:
        target(f"frozen-prefix speed-up, embedded backbone, batch {r['batch']}", r["speedup"],
               bench["targets"]["embedded_cache_speedup"], True, "x", judged=r["batch"] == pipeline)
    for r in pc["qwen_shaped"]:
        if r["blocks"] == 28:
            target(f"frozen-prefix speed-up, Qwen3-0.6B-shaped (28 blocks), batch {r['batch']}", r["speedup"],
                   bench["targets"]["qwen_cache_speedup"], True, "x", judged=r["batch"] == pipeline)
    display(Markdown(f"{rows[0]['samples']} questions, top k = {rows[0]['k']} blocks trained, median of "
                     f"{rows[0]['naive_epoch']['reps']} epochs after a warm-up. The Qwen3-0.6B-shaped stacks keep its "
                     f"depth and shape ratios at a quarter of its width ({pc['qwen_shape']}), with random weights, to fit "
                     "a CPU budget. Speed-up = median naive epoch / median cached epoch; its range pairs the extreme "
                     "repetitions (slowest naive over fastest cached, and the reverse)."))
    shown = cache.assign(**{"speed-up (range)": [f"{a:.2f} ({lo:.2f}-{hi:.2f})" for a, lo, hi in
                                                 zip(cache["speedup"], cache["speedup_min"], cache["speedup_max"])]})
    shown = shown[["backbone", "blocks L", "batch", "naive epoch s", "cached epoch s", "prefix once s", "speed-up (range)",
                   "bound", "share of bound"]]
    display(plots.styled(shown, precision=2, hide_index=True))
    qwen = cache[cache["backbone"] == "Qwen3-shaped"].rename(columns={"blocks L": "blocks"})
    plots.speedup_vs_bound(qwen, "Qwen3-0.6B-shaped stacks: cache speed-up vs depth");

# %% [markdown]
# ## Experts and routers on cached pooled features

# %% tags=["hide-input"]
if bench and "features_cache" in bench and "throughput" in bench:
    fc, tp = bench["features_cache"], bench["throughput"]
    display(Markdown(f"One router epoch over {fc['samples']} questions: {span(fc['cached_epoch'])} s on cached "
                     f"features, {span(fc['recompute_epoch'])} s recomputing the frozen backbone each step: "
                     f"**{fc['speedup']:.0f}x** faster."))
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

# %% [markdown]
# ## Notebooks, cold
#
# Each notebook executed by papermill, in book order, into a fresh results folder with an empty stage
# cache, then the strict HTML build; the peak memory is the kernel's maximum resident set size. The
# smoke profile is timed over several such cold passes (median, min-max); the full profile once, as a
# repetition costs as long again, so its times carry no spread.

# %% tags=["hide-input"]
if bench:
    nb_rows = []
    for prof, block in bench.get("notebooks", {}).items():
        for name, t in block["per_notebook"].items():
            w = t["wall"]
            nb_rows.append({"profile": prof, "notebook": name, "cold passes": w["reps"],
                            "cold wall s (median)": round(t["wall_seconds"], 1),
                            "min-max s": f"{w['min']:.1f}-{w['max']:.1f}" if w["reps"] > 1 else "",
                            "peak kernel memory MiB": t["peak_rss_mb"]})
        if prof == "full" and block["book_build_seconds"] is not None:
            target("whole full-profile book (every notebook cold + strict build)", block["total_seconds"] / 60,
                   bench["targets"]["full_book_minutes"], False, "min")
    if "full" not in bench.get("notebooks", {}):
        display(Markdown("**This bench run did not time the full profile cold** (`--profiles` "
                         f"{','.join(bench.get('profiles_timed', []))}): the whole-book target is not measured here; "
                         "`make bench` with its defaults times it."))
    if nb_rows:
        nbt = pd.DataFrame(nb_rows)
        results.table("notebooks", nbt)
        target("peak kernel memory of any notebook", nbt["peak kernel memory MiB"].max() / 1024,
               bench["targets"]["peak_rss_gib"], False, "GiB")
        display(plots.styled(nbt, precision=1, hide_index=True))
    builds = {p: b["book_build_seconds"] for p, b in bench["notebooks"].items() if b["book_build_seconds"] is not None}
    totals = {p: b["total_seconds"] / 60 for p, b in bench["notebooks"].items() if b["book_build_seconds"] is not None}
    if builds:
        display(Markdown("Strict HTML build of the executed notebooks: " + ", ".join(f"{v:.0f} s ({k})" for k, v in builds.items())
                         + "; whole book, notebooks and build: " + ", ".join(f"{v:.1f} min ({k})" for k, v in totals.items()) + "."))

# %% [markdown]
# ## The test command
#
# `make test` as CI runs it (each recipe of its `unit` and `notebooks` targets, with an empty stage cache),
# timed command by command.

# %% tags=["hide-input"]
if bench and "smoke_test_command" in bench:
    st = bench["smoke_test_command"]
    steps = pd.DataFrame([{"command": s["command"], "seconds": round(s["seconds"], 1)} for s in st["steps"]])
    results.table("test_command", steps)
    target("whole smoke test command (make test)", st["total_seconds"] / 60, bench["targets"]["smoke_test_minutes"], False, "min")
    display(plots.styled(steps, precision=1, hide_index=True))
elif bench:
    display(Markdown("This bench run did not time the test command (it is timed by `make bench` without `--smoke`)."))

# %% [markdown]
# ## Targets

# %% tags=["hide-input"]
if bench and targets:
    tt = pd.DataFrame(targets)
    results.table("targets", tt)
    colour = {"yes": "background-color: #c8e6c9", "no": "background-color: #ffcdd2"}
    display(plots.styled(tt, hide_index=True).map(lambda v: colour.get(v, ""), subset=["met"]))

# %% [markdown]
# ## From run to run
#
# Every full `make bench` run adds its headline numbers to `results/bench/history.jsonl`. The spreads
# above are between repetitions inside one run; this table shows whether separate runs agree as
# closely, which matters when a target is met or missed by a small margin.

# %% tags=["hide-input"]
hist_path = path.parent / "history.jsonl"
history = pd.DataFrame([json.loads(line) for line in hist_path.read_text().splitlines() if line.strip()]) \
    if hist_path.exists() else pd.DataFrame()
if len(history):
    runs = history.set_index("git_commit").drop(columns=["started_at"]).T
    runs.columns = [f"run {i + 1} ({c})" for i, c in enumerate(runs.columns)]
    results.table("history", runs)
    display(plots.styled(runs, precision=2))
else:
    display(Markdown("No full bench run has been recorded yet."))

# %% [markdown]
# ## Where the time goes
#
# The stage cache records how long each stage took to compute; for the slowest notebook of the cold
# full-profile run, the time by stage kind (summed over seeds and splits) is below, followed by a
# cProfile of one Task 1 seed and split from an empty cache (functions by cumulative time).

# %% tags=["hide-input"]
stage_s = {}
if bench and bench.get("notebooks"):
    prof = "full" if "full" in bench["notebooks"] else list(bench["notebooks"])[-1]
    per_nb = bench["notebooks"][prof]["per_notebook"]
    slowest = max(per_nb, key=lambda k: per_nb[k]["wall_seconds"])
    stage_s = per_nb[slowest].get("stage_seconds") or {}
    if stage_s:
        wall = per_nb[slowest]["wall_seconds"]
        by_kind = pd.DataFrame([{"stage kind": k, "what": STAGE_KINDS.get(k, ""), "seconds": v,
                                 "share of notebook": f"{v / wall:.0%}"}
                                for k, v in sorted(stage_s.items(), key=lambda kv: -kv[1])])
        results.table("stage_seconds", by_kind)
        display(Markdown(f"`{slowest}` ({prof} profile, cold: {wall / 60:.1f} min), time by stage kind:"))
        display(plots.styled(by_kind, precision=1, hide_index=True))
if bench and "profile" in bench:
    display(Markdown(f"cProfile of {bench['profile']['what']}:"))
    display(plots.styled(cprofile_table(bench["profile"]["cprofile"]).head(15), precision=3, hide_index=True))

# %% [markdown]
# ## What we found

# %% tags=["hide-input"]
if bench and targets:
    judged = [t for t in targets if t["met"] in ("yes", "no")]
    missed = [t for t in judged if t["met"] == "no"]
    steps_ratio = bench["prefix_cache"]["pipeline_batch"] // bench["prefix_cache"]["paper_batch"] if "prefix_cache" in bench else 1
    lines = [f"- {len(judged) - len(missed)} of {len(judged)} targets met on this machine."]
    lines += [f"- Missed: {t['target']}: {t['measured']} against {t['goal']}, {t['gap']}." for t in missed]
    lines += [f"- For reference only (not a target): {t['target']}: {t['measured']} against {t['goal']}, {t['gap']}; "
              f"with {steps_ratio}x as many steps per epoch, the work every step pays in both paths weighs more."
              for t in targets if t["met"] == "reference: no"]
    if stage_s:
        top2 = by_kind.head(2)
        named = [f"`{k}` ({w})" for k, w in zip(top2["stage kind"], top2["what"])]
        lines.append(f"- In the slowest notebook, `{slowest}`, the stages {named[0]} and {named[1]} take "
                     f"{top2['seconds'].sum() / wall:.0%} of its cold time: that is where a faster pipeline would start.")
    if len(history) > 1 and "prefix_cache" in bench:
        for col in [c for c in history.columns if c.startswith("speed-up") and c.endswith(f"batch {pipeline}")]:
            lines.append(f"- Across the {len(history)} recorded bench runs, {col.removeprefix('speed-up ')}: "
                         f"{history[col].min():.2f}x to {history[col].max():.2f}x.")
    if "features_cache" in bench:
        lines.append(f"- Cached pooled features make a router epoch {bench['features_cache']['speedup']:.0f}x cheaper than "
                     "recomputing the backbone: stages 2-4 of every experiment train on them.")
    display(Markdown("\n".join(lines)))

# %% tags=["hide-input"]
results.finish()
display(Markdown(results.provenance_markdown()))
