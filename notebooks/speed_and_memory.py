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
profile = "full"  # which results to read: results/<profile>/
seed = 0  # unused: this page trains nothing
device = "cpu"  # unused: this page trains nothing
results_dir = "results"  # where the notebooks wrote their results

# %% tags=["hide-input"]
import pandas as pd
from IPython.display import Markdown, display

from redlib.bench import report
from redlib.bench.cold import cold_answer, cold_book
from redlib.book import pages, plots, registry
from redlib.book.glue import glue_values
from redlib.book.costs import cold_estimates
from redlib.core.runtime import resolve_path

cfg, results = pages.start("speed_and_memory", globals())
path = resolve_path(cfg.results_dir) / "bench" / "bench.json"
bench = report.load(path)


def show_measured(key: str, what: str, build, glue_name: str | None = None) -> None:
    """A micro-benchmark's table from the bench (and its glued speed-up), or a line saying it is not measured yet;
    `build` turns the bench's entry into (table, caption, glued text)."""
    if not (bench and key in bench):
        display(Markdown(f"{what} not been measured yet: `python -m redlib bench --kernels`."))
        if glue_name:
            glue_values({glue_name: "not measured"})
        return
    table, caption, glued = build(bench[key])
    results.table(key, table)
    display(plots.styled(table, hide_index=True, caption=caption))
    if glue_name:
        glue_values({glue_name: glued})


if bench is None:
    display(Markdown(f"No benchmark has been run yet (`{path.name}` is missing): run `make bench`."))
else:
    m = bench["machine"]
    display(Markdown(f"Measured on {m['platform']} ({m['cpu_count']} CPUs, {m['torch_threads']} torch threads), commit "
                     f"`{bench['git_commit'][:12]}`{' - smoke mode: tiny sizes, one repetition' if bench['smoke'] else ''}."))
    if bench.get("errors"):
        display(Markdown("**Steps of this bench run that failed:** " + "; ".join(f"{k}: {v}" for k, v in bench["errors"].items())))

# %% [markdown]
# :::{admonition} The answer
# :class: tip
# {glue:text}`sp_answer` Each page's own time, the micro-benchmarks behind the speed levers and the
# machine's details follow.
# :::

# %% tags=["remove-cell"]
glue_values({"sp_answer": cold_answer(cold_book(bench), registry.BOOK_MINUTES)})

# %% [markdown]
# The budgets each page's cold run is held to (full profile, from an empty stage cache, on this
# 2-core machine), set in the page registry (`redlib/book/registry.py`):

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
budgets = pd.DataFrame([{"pages": " + ".join(b.pages), "budget, min": b.minutes} for b in registry.BUDGETS]
                       + [{"pages": "the whole book (every page and the HTML build)", "budget, min": registry.BOOK_MINUTES}])
plots.styled(budgets, caption="Cold-time budgets", hide_index=True)

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

# %% tags=["hide-input", "hide-output"]
if bench and "prefix_cache" in bench:
    cache = report.prefix_cache(bench)
    results.table("prefix_cache", cache)
    first, pc = bench["prefix_cache"]["embedded"][0], bench["prefix_cache"]
    display(Markdown(f"{first['samples']} questions, top k = {first['k']} blocks trained, median of "
                     f"{first['naive_epoch']['reps']} epochs after a warm-up. The Qwen3-0.6B-shaped stacks keep its "
                     f"depth and shape ratios at a quarter of its width ({pc['qwen_shape']}), with random weights, to fit "
                     "a CPU budget. Speed-up = median naive epoch / median cached epoch; its range pairs the extreme "
                     "repetitions (slowest naive over fastest cached, and the reverse)."))
    shown = cache.assign(**{"speed-up (range)": [f"{a:.2f} ({lo:.2f}-{hi:.2f})" for a, lo, hi in
                                                 zip(cache["speedup"], cache["speedup_min"], cache["speedup_max"])]})
    shown = shown[["backbone", "blocks L", "batch", "naive epoch s", "cached epoch s", "prefix once s", "speed-up (range)",
                   "bound", "share of bound"]]
    display(plots.styled(shown, precision=2, hide_index=True, caption="Frozen-prefix cache against naive training, per backbone and depth"))
    qwen = cache[cache["backbone"] == "Qwen3-shaped"].rename(columns={"blocks L": "blocks"})
    plots.speedup_vs_bound(qwen, "Qwen3-0.6B-shaped stacks: cache speed-up vs depth");

# %% [markdown]
# ## The fp32 kernels and how close stage 1 comes to the cores' peak
#
# Each run picks its matrix-multiply kernels once, by CPU vendor, after checking a small product against
# float64 (`redlib/speed/kernels.py`): on AMD, oneDNN's AVX-512 kernels beat the AVX2 path torch's MKL takes
# there; on Intel, MKL's own AVX-512 path stays. oneDNN is capped below AMX (bf16 units), a path failing the
# self-check is refused, and the path taken is in every run's provenance. Stage 1's speed (top two blocks and
# head, forward and backward, the pipeline's batch) is set against a large fp32 product on the same threads,
# the most these cores reach, and against the path not taken, in the same process.

# %% tags=["hide-input", "hide-output"]
show_measured("kernels", "The kernels have", lambda k: (pd.DataFrame([{
    "kernel path": k["matmul"]["path"], "why": k["matmul"]["why"], "threads": k["threads"],
    "CPU": k["matmul"]["vendor"], "stage 1 GFLOP/s": k["stage1_gflops"], "2048² product GFLOP/s": k["gemm_2048_gflops"],
    "stage 1 share": f"{k['stage1_share_of_gemm']:.0%}",
    "path not taken": k.get("other_path", {}).get("path", "-"),
    "stage 1 on it, GFLOP/s": k.get("other_path", {}).get("stage1_gflops"),
    "measured at": f"{k['git_commit'][:7]}, {k['measured_at'][:10]}"}]),
    "fp32 matmul kernels and stage 1's throughput (make bench --kernels)", None))

# %% [markdown]
# Where a stage-1 step's time goes, the part that is not the large matrix products in particular: one step
# (the same blocks, batch and AdamW as the pipeline's) timed by phase, then under `torch.profiler`, whose
# operators are grouped by what they do and counted by their own CPU time (the profiler adds its overhead;
# the phases' wall times in the caption are measured without it).

# %% tags=["hide-input", "hide-output"]
show_measured("stage1_profile", "Stage 1's profile has", lambda p: (
    report.profile_table(p),
    "One stage-1 step, own CPU ms per operator group and phase (torch.profiler; wall ms without it: "
    + ", ".join(f"{k} {v:.0f}" for k, v in p["phases_ms"].items()) + f"; {p['matmul']['path']} kernels)", None))

# %% [markdown]
# One lever the profile points to: the optimiser step. AdamW's fused implementation updates every parameter in
# one kernel; it computes the same fp32 update as the per-tensor `foreach` one, rounded differently, and every
# stage trains with it (`ADAMW` in `redlib/core/train.py`; the choice is in every stage's cache key):

# %% tags=["hide-input", "hide-output"]
show_measured("optimizer", "The AdamW kinds have", lambda o: (pd.DataFrame([{
    "AdamW": kind + (" (used)" if kind == o["chosen"] else ""),
    "stage 1 steps/s": round(v["stage1_steps_per_second"]["median"], 2),
    "small-stage steps/s (1 thread)": round(v["small_steps_per_second"]["median"])} for kind, v in o["kinds"].items()]),
    f"AdamW fused against foreach: stage 1 {o['stage1_speedup']:.2f}x, a small stage {o['small_speedup']:.2f}x; after "
    f"10 steps their parameters differ by {o['relative_difference_after_10_steps']:.1e} of the largest", None))

# %% [markdown]
# The small stages after stage 1 (experts, residuals, routers, gates, stage 4) take steps of 16 feature vectors:
# too little work to share between threads, so the page's worker processes train them on one torch thread each
# (`STAGE_THREADS` in `redlib/speed/parallel.py`), in the page's own process as well, since another thread count can
# round a sum differently: a residual's steps per second, summed over two processes side by side as the workers
# run. And the experts of one kind in one seed train as one stack (`redlib/core/stacked.py`): each linear layer one
# batched product over the experts, each expert with its own data order, AdamW state, early stopping and best
# state, the mathematics of separate fits to fp32 round-off (`tests/test_stacked.py`): expert-steps per second
# (one expert's batch, forward and backward), one thread, five experts:

# %% tags=["hide-input", "hide-output"]
show_measured("stage_threads", "The small stages' thread counts have", lambda t: (
    report.steps_table(t, "per_thread_count", {"threads": "torch threads per worker"}, "steps/s, all workers", ",.0f",
                       workers=t["workers"]),
    "Small-stage training steps per second by thread count (make bench --kernels)",
    f"{t['speedup_1_over_2']:.2f}x"), "sp_stage_threads")
show_measured("stacked", "Stacked small stages have", lambda t: (pd.DataFrame([{
    "kind": r["kind"], "batch (virtual)": f"{r['batch']} ({r['virtual batch']})",
    "separate fits, expert-steps/s": round(r["separate expert-steps per second"]),
    "stacked, expert-steps/s": round(r["stacked expert-steps per second"]), "speed-up": round(r["speedup"], 2)}
    for r in t["per_kind"]]),
    f"{t['experts']} experts of {t['samples per expert']} samples, {t['epochs']} epochs each (make bench --kernels)",
    "; ".join(f"{r['kind']} at batch {r['batch']} {r['speedup']:.2f}x" for r in t["per_kind"])), "sp_stacked")

# %% [markdown]
# Texts are right-padded to the longest text of their task; the attention mask hides the padding, so it changes
# no value, but the top blocks still compute over it. Each batch is therefore cut to its own longest text, and
# validation and the features run shortest texts first, so their batches carry little padding. On Task 2's
# texts (one to three steps, the most varied in length), stage 1 with and without the cut:

# %% tags=["hide-input", "hide-output"]
show_measured("text_padding", "Cutting the padding has", lambda t: (pd.DataFrame([{
    "pass": {"train": f"{t['steps']} training steps of {t['batch']} texts",
             "validate": f"validation over {t['texts']} texts"}[k],
    "padded to the longest of all, s": report.span(t["padded"][k]),
    "cut to the batch's longest, s": report.span(t["cut"][k]), "speed-up": round(t[f"{k}_speedup"], 2)}
    for k in ("train", "validate")]),
    f"Stage 1 on Task 2's texts (mean {t['mean tokens']:.1f} tokens, padded to {t['padded to']}), make bench --kernels",
    f"{t['train_speedup']:.2f}x in training and {t['validate_speedup']:.2f}x in validation"), "sp_padding")

# %% [markdown]
# Stage-1 runs (the seeds, the settings, the rates tried) are independent. Task 1 and Task 2 train theirs two at a
# time, in two worker processes on the page's two threads each: a serial run's bits, so no number depends on the
# worker count. Two one-thread processes would be faster still, but one thread sums in another order and trains
# other bits. Stage-1 training steps per second, one process on two threads against two processes side by side
# (their sum):

# %% tags=["hide-input", "hide-output"]
show_measured("stage1_processes", "Stage 1 side by side has", lambda t: (
    report.steps_table(t, "per_layout", {"processes": "processes", "threads each": "torch threads each"},
                       "steps/s, all processes"),
    "Stage-1 training steps per second, one run at a time or two side by side (make bench --kernels)",
    (f"{t['speedup_side_by_side_page_threads']:.2f}x on two threads each (what Task 1 and Task 2 run) and "
     if "speedup_side_by_side_page_threads" in t else "") + f"{t['speedup_side_by_side']:.2f}x on one thread each"),
    "sp_stage1_side")

# %% [markdown]
# ## Experts and routers on cached pooled features

# %% tags=["hide-input", "hide-output"]
if bench and "features_cache" in bench and "throughput" in bench:
    fc, tp = bench["features_cache"], bench["throughput"]
    display(Markdown(f"One router epoch over {fc['samples']} questions: {report.span(fc['cached_epoch'])} s on cached "
                     f"features, {report.span(fc['recompute_epoch'])} s recomputing the frozen backbone each step: "
                     f"**{fc['speedup']:.0f}x** faster."))
    thr = pd.DataFrame([{"method": k, "queries per second": round(v["queries_per_second"]), "seconds per batch": report.span(v)}
                        for k, v in tp["methods"].items()]
                       + [{"method": "backbone forward (embedded)", "queries per second": round(tp["backbone"]["queries_per_second"]),
                           "seconds per batch": report.span(tp["backbone"])}])
    results.table("throughput", thr)
    display(Markdown(f"### Inference throughput\n\nRED's head (router + five residuals + classifier) costs "
                     f"{tp['red_extra_cost_vs_backbone']:.2%} of a backbone forward per query; its residuals and router "
                     f"hold {tp['params']['red_residuals_and_router']:,} parameters against the backbone's "
                     f"{tp['params']['backbone']:,} and the MoE's experts and router {tp['params']['moe_experts_and_router']:,}."))
    display(plots.styled(thr, hide_index=True, caption="Inference throughput per method"))

# %% [markdown]
# ## The routes to this book
#
# The README's commands and what each cost on the machine that ran `make bench` (the intro points here):

# %% tags=["hide-input"]
plots.styled(report.route_costs(path), caption="The routes to this book and their cost", hide_index=True)

# %% [markdown]
# ## Notebooks, cold
#
# Each notebook executed by papermill, in book order, from an empty stage cache (a page that builds on
# others' stages starts from theirs), then the strict HTML build. A page's peak memory is its kernel and
# workers together, sampled every 0.25 s. The smoke profile is timed over several cold passes (median,
# min-max), the full profile once. A page is re-timed alone after it changes
# (`make bench BENCH_ARGS="--notebooks NAME"`): `commit` says which code each time measured, and the cold book
# is the sum of the pages' last times. `disturbed` flags a time other processes shared (it reads high). A time
# is today's where both last columns say yes: today's parameters, and the claims (or, where none were recorded,
# the code by git) of the published page.

# %% tags=["hide-input"]
nbt = report.notebooks(bench) if bench else pd.DataFrame()  # each page's cold timing, read once for the page
if bench:
    if "full" not in bench.get("notebooks", {}):
        display(Markdown("**This bench run did not time the full profile cold** (`--profiles` "
                         f"{','.join(bench.get('profiles_timed', []))}): the whole-book target is not measured here; "
                         "`make bench` with its defaults times it."))
    if len(nbt):
        results.table("notebooks", nbt)
        for prof, part in nbt.groupby("profile", sort=False):  # "ran as published" speaks of the full profile only
            part = part.drop(columns=["profile"] + ([report.SAME_CODE] if prof != "full" else []))
            if not part["disturbed"].any():  # nothing else ran beside these timings
                part = part.drop(columns=["disturbed"])
            if (part["cold passes"] == 1).all():  # one pass each: no spread to show
                part = part.drop(columns=["cold passes"]).rename(columns={"cold wall s (median, min-max)": "cold wall s"})
            display(plots.styled(part, precision=3, hide_index=True, caption=f"Each notebook's cold run, {prof} profile"))
    retimed, superseded = report.retimings(bench)
    if len(retimed):
        display(plots.behind_click(plots.styled(retimed, hide_index=True, caption="The re-timings behind these tables: "
                                                "pages timed apart from a whole bench run, latest first"),
                                   f"The {len(retimed)} re-timings behind these tables (click to show)"))
        display(Markdown(f"{superseded} earlier re-timings were superseded; `results/bench/bench.json` keeps them "
                         "(`page_updates`)."))
    built = {p: b for p, b in bench["notebooks"].items() if b["book_build_seconds"] is not None}
    if built:
        display(Markdown("Strict HTML build of the executed notebooks: "
                         + ", ".join(f"{b['book_build_seconds']:.0f} s ({p})" for p, b in built.items())
                         + "; whole book, notebooks and build: "
                         + ", ".join(f"{b['total_seconds'] / 60:.1f} min ({p})" for p, b in built.items()) + "."))

# %% [markdown]
# ## An estimate, not a timing: what the published runs' stages cost
#
# A cold timing says something about today's book only where it ran today's profile and code. Where it did
# not, the published run itself still tells what its stages cost: the stage cache records each stage's
# seconds when it was computed, and every page's provenance sums them by stage kind. Stage 1 trains apart from
# the other stages (two runs at a time on the range pages, each counting its share of the time), the other stages
# in the page's `workers` processes, so the page's training takes between "all busy" (every process training all
# the time: the sum over workers + 1) and "stage 1 apart" (stage 1's seconds, then the rest shared by the
# workers). This is a range read off the record, not a timing;
# where a cold run of today's page was timed, it stands beside it as the check. `robustness_and_cost` reuses
# the stages of the pages it builds on, so its row counts them again and the book's sum leaves it out.

# %% tags=["hide-input"]
est = report.with_cold_times(bench, cold_estimates(list(registry.NOTEBOOKS), cfg.profile, cfg.results_dir), nbt)
own = est[est["page"] != "robustness_and_cost"]  # each page's own stages (robustness reuses other pages')
if len(est):
    results.table("cold_estimates", est)
    display(plots.styled(est, precision=1, hide_index=True,
                         caption="Estimate: the training time each published page implies, against its cold timing where one is today's"))

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
    display(plots.styled(steps, precision=1, hide_index=True, caption="make test, step by step"))
elif bench:
    display(Markdown("This bench run did not time the test command (it is timed by `make bench` without `--smoke`)."))

# %% [markdown]
# ## Targets

# %% tags=["hide-input"]
if bench:
    # the budgets judge full-profile timings: beside a stale one, what the full page as published implies
    tt = report.targets(bench, nbt, own if cfg.profile == "full" else None)
    results.table("targets", tt)
    colour = {"yes": "background-color: #c8e6c9", "no": "background-color: #ffcdd2"}
    display(plots.styled(tt, hide_index=True, caption="Targets on this machine").map(lambda v: colour.get(v, ""), subset=["met"]))

# %% [markdown]
# ## From run to run
#
# Every full `make bench` run adds its headline numbers to `results/bench/history.jsonl`. The spreads
# above are between repetitions inside one run; this table shows whether separate runs agree as
# closely, which matters when a target is met or missed by a small margin. Each column is one whole
# bench run with the profile and code of its commit: its book time and memory are that day's, not
# today's (today's are in the tables above, the only ones the rest of the book quotes).

# %% tags=["hide-input", "hide-output"]
history = report.history(path.parent / "history.jsonl")
if len(history):
    runs = history.set_index("git_commit").drop(columns=["started_at"]).T
    runs.columns = [f"run {i + 1} ({c})" for i, c in enumerate(runs.columns)]
    runs = runs.rename(index={"full book min": "whole book cold, min (that run's profile)",
                              "test command min": "make test, min (that run's tests)",
                              "peak memory GiB": "largest page's peak, GiB (that run; kernel alone before workers were sampled)"})
    results.table("history", runs)
    display(plots.styled(runs, precision=2, caption="Headline numbers of every recorded full bench run"))
else:
    display(Markdown("No full bench run has been recorded yet."))

# %% [markdown]
# ## Where the time goes
#
# The stage cache records how long each stage took to compute; for the slowest notebook of the cold
# full-profile run, the time by stage kind (summed over seeds and splits) is below, followed by a
# cProfile of one Task 1 seed and split from an empty cache (functions by cumulative time). Stage 1
# trains apart (on Task 1 and Task 2 two runs at a time, each counting its share of the time); the
# small stages after it (experts, routers, gates, stage 4) train side by side in `workers` processes,
# so their seconds overlap and the shares can add up to more than the notebook's wall time.

# %% tags=["hide-input", "hide-output"]
if bench and bench.get("notebooks"):
    slowest, wall, by_kind = report.stage_kinds(bench)
    if len(by_kind):
        results.table("stage_seconds", by_kind)
        display(Markdown(f"`{slowest}` (cold: {wall / 60:.1f} min), time by stage kind:"))
        display(plots.styled(by_kind, precision=1, hide_index=True, caption=f"{slowest}, cold: seconds per stage kind"))
if bench and "profile" in bench:
    display(Markdown(f"cProfile of {bench['profile']['what']}:"))
    display(plots.styled(report.cprofile_table(bench["profile"]["cprofile"]).head(15), precision=3, hide_index=True,
                         caption="cProfile: the 15 functions with the most cumulative time"))

# %% tags=["remove-cell"]
glue_values(report.found(bench, tt if bench else None, history, nbt))

# %% [markdown]
# :::{dropdown} The targets missed, the stale timings, and the speed levers, measured
# - **Missed**: {glue:md}`sp_missed`. For reference only: {glue:text}`sp_reference`.
# - **Out of date**: timings not of today's profile (the totals that include them are stale): {glue:md}`sp_stale`.
# - The small stages train {glue:text}`sp_stage_threads` as fast on one torch thread per worker as on two (two
#   workers side by side): that is why they run on one.
# - Cutting each batch of texts to its longest text makes stage 1 on Task 2 {glue:text}`sp_padding`.
# - Against one stage-1 run on two threads, two runs side by side train {glue:text}`sp_stage1_side` as fast;
#   Task 1 and Task 2 train theirs two at a time, which keeps a serial run's bits, at the price of each worker
#   holding its data set's frozen-prefix states (where free memory does not hold both, one after another).
# - The experts of one kind train as one stack: {glue:text}`sp_stacked` their separate fits' speed.
# - Cached pooled features make a router epoch cheaper than recomputing the backbone by
#   {glue:text}`sp_features`: stages 2-4 of every experiment train on them.
# - Across the recorded bench runs, the speed-ups ranged: {glue:text}`sp_agreement`.
# :::

# %% [markdown]
# ## What we found
#
# - **Targets**: {glue:text}`sp_met` of {glue:text}`sp_judged` met on this machine; each miss, with its
#   measured cause, is a row of the targets table above (and in the box below).
# - **The cold book**: {glue:text}`sp_book` (each page's last cold run, in minutes, with the commit it was timed
#   at, plus the strict HTML build), against the 90-minute budget.
# - **Where the time goes**, the slowest notebook: {glue:md}`sp_where`.

# %% tags=["hide-input"]
results.finish()
display(Markdown(results.provenance_markdown()))
