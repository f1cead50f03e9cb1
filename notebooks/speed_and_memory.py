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
# The paper reports 3-4 hours of training on an RTX 3060 Ti and under 6.5 GB of memory. This page asks what the
# companion costs on a 2-core laptop CPU: does the whole book, built cold from one command, fit its budget, and what
# costs most? Every number is read from `results/bench/bench.json`, written by `make bench`.

# %% tags=["parameters", "remove-cell"]
profile = "full"  # which results to read: results/<profile>/
results_dir = "results"  # where the notebooks wrote their results

# %% tags=["hide-input"]
from IPython.display import Markdown, display

from redlib.bench import page as speed
from redlib.book import pages, plots
from redlib.book.glue import glue_values
from redlib.core.paths import resolve_path

cfg, results = pages.start("speed_and_memory", globals())
page = speed.speed_page(resolve_path(cfg.results_dir) / "bench" / "bench.json", cfg.profile, cfg.results_dir)
show = speed.shower(results)  # keep a table in the results and show it, or the line saying why it is missing
glue_values(speed.found(page))
display(Markdown(speed.machine_line(page)))

# %% [markdown]
# :::{admonition} The answer
# :class: tip
# {glue:text}`sp_answer` The targets, each page's cold time and where it goes follow; then the levers that make
# the pipeline fast, and the machine's details last.
# :::
#
# ## The budget and the targets
#
# Each target judged on this machine; a miss says by how much and where its time goes.

# %% tags=["hide-input"]
colour = {"yes": "background-color: #c8e6c9", "no": "background-color: #ffcdd2"}
if len(page.targets):
    show(speed.Table("targets", page.targets, "Targets on this machine"),
         styler=lambda s: s.map(lambda v: colour.get(v, ""), subset=["met"]))

# %% [markdown]
# The budgets each page's cold run is held to (full profile, from an empty stage cache, on this 2-core machine),
# set in the page registry (`redlib/book/registry.py`), and the README's routes to the book with what each cost:

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
budgets = speed.budgets()
plots.styled(budgets.data, caption=budgets.caption, hide_index=True)

# %% tags=["hide-input"]
from redlib.bench.report import route_costs

plots.styled(route_costs(page.path), caption="The routes to this book and their cost", hide_index=True)

# %% [markdown]
# ## Each page, cold
#
# Each notebook executed by papermill from an empty stage cache (a page that builds on others' stages starts from
# theirs), then the strict HTML build. A page's peak memory is its kernel and workers together, sampled every
# 0.25 s. A page is re-timed alone after it changes (`make bench BENCH_ARGS="--notebooks NAME"`): `commit` says
# which code each time measured. A time is today's where both last columns say yes: today's parameters, and the
# claims of the published page. The cold book is never the sum of these times: it is one pass of every page and the
# build from an empty stage cache, at one commit on one machine (`make bench BENCH_ARGS="--publish --cache DIR"`,
# which also re-publishes the book; a pass a session's end stopped resumes from DIR, and its segments add up).

# %% tags=["hide-input"]
if len(page.notebooks):
    results.table("notebooks", page.notebooks)
for table in speed.notebook_tables(page):  # the full profile's in view, the others' behind a click
    sty = plots.styled(table.data, precision=3, hide_index=True, caption=table.caption)
    display(sty if table.name == "notebooks_full" else plots.behind_click(sty, table.caption))
display(Markdown(speed.build_line(page)))

# %% [markdown]
# Where the slowest page's time goes, by stage kind (summed over seeds and settings). Stage 1 trains apart; the
# small stages after it train side by side in `workers` processes, so the shares can add up to more than the
# page's wall time.

# %% tags=["hide-input"]
line, by_kind = speed.where_time_goes(page)
display(Markdown(line))
show(by_kind, precision=1)

# %% [markdown]
# **An estimate, not a timing.** The stage cache records each stage's seconds, so a published page's training takes
# between "all busy" (every process training all the time) and "stage 1 apart" (stage 1's seconds, then the rest
# shared by the workers). `robustness_and_cost` reuses the stages of the pages it builds on. The "longest stage"
# column says what the protocol costs: a stage trains until patience stops it, at hundreds or thousands of epochs.

# %% tags=["hide-input"]
show(speed.Table("cold_estimates", page.estimates,
                 "Estimate: the training time each published page implies, against its cold timing where one is "
                 "today's"), precision=1, folded="The training time each published page implies (an estimate)")

# %% [markdown]
# ## The speed levers, measured
#
# **The frozen-prefix cache.** With $L$ blocks of which the top $k$ train, a naive step runs all $L$ blocks forward
# and the top $k$ backward (about $L + 2k$ block-forwards); the cached step runs only the top $k$ (about $3k$). The
# speed-up is bounded by about $(L + 2k) / 3k$: 1.67x for the embedded backbone ($L = 6$, $k = 2$), 5.3x for
# Qwen3-0.6B ($L = 28$). The target is judged at the pipeline's micro-batch; work every step pays in both paths
# (the optimiser, Python) pulls the ratio below the bound, more so at small batches.

# %% tags=["hide-input"]
show(page.levers["prefix_cache"], precision=2)

# %% tags=["hide-input"] mystnb={"figure": {"caption": "The frozen-prefix cache's measured speed-up (naive step over cached step, min-max over repetitions as bars) on stacks shaped as Qwen3-0.6B's blocks, against the bound (L + 2k) / 3k, per depth L and batch.", "name": "fig-speed-cache"}, "image": {"alt": "Line chart of the cache speed-up against depth, measured and bound"}}
if (qwen := speed.qwen_depths(page)) is not None:
    plots.speedup_vs_bound(qwen, "Qwen3-0.6B-shaped stacks: cache speed-up vs depth");

# %% [markdown]
# **Stacked small stages.** The experts of one kind in one seed train as one stack (`redlib/core/stacked.py`): separate
# fits' mathematics to fp32 round-off (`tests/test_stacked.py`); beside each step's milliseconds, its products' alone
# at this thread's GEMM rate. A page's runs share one pool of workers (`schedule.prefetch_runs`).
# **One thread per worker.** Steps of 16 feature vectors are too little work to share between threads, so the
# workers train the small stages on one torch thread each (`STAGE_THREADS` in `redlib/speed/parallel.py`).

# %% tags=["hide-input"]
show(page.levers["stacked"])
show(page.levers["stage_threads"])

# %% [markdown]
# **Padding cut per batch.** Texts are right-padded to the longest of their task; the mask hides the padding, but the
# top blocks still compute over it, so each batch is cut to its own longest text. **Stage 1 two at a time.** Task 1
# and Task 2 train their stage-1 runs two at a time, in two processes on the page's two threads each: a serial
# run's bits, so no number depends on the worker count. **Cached features.** Stages 2-4 train on pooled features
# computed once, not on the backbone at every step.

# %% tags=["hide-input"]
for key in ("text_padding", "stage1_processes", "throughput"):
    show(page.levers[key])

# %% [markdown]
# **Stage 1 in bf16?** The paper trained its backbone stage in mixed precision; `-p precision bf16` runs stage 1
# under bf16 autocast (fp32 weights and AdamW, AMX units where the CPU has them). A rule fixed before the runs
# decides the published default (`make bench BENCH_ARGS="--precision DIR"`); the comparison, whichever way it went:

# %% tags=["hide-input"]
from redlib.bench import precision as stage1_precision

comparison = stage1_precision.load(resolve_path(cfg.results_dir) / "bench" / "precision.json")
display(Markdown(stage1_precision.sentence(comparison)))

# %% tags=["hide-input", "hide-output"]
show(stage1_precision.time_table(comparison), 1)
show(stage1_precision.claims_table(comparison), 4)

# %% [markdown]
# ## The test command
#
# `make test` as CI runs it (each recipe of its `unit` and `notebooks` targets, with an empty stage cache):

# %% tags=["hide-input"]
steps = speed.make_test_steps(page)
show(steps, precision=1) if steps else display(Markdown("This bench run did not time the test command."))

# %% [markdown]
# ## The machine
#
# Each run picks its matrix-multiply kernels once, by CPU vendor, after checking a small product against float64
# (`redlib/speed/kernels.py`): on AMD oneDNN's AVX-512 kernels, on Intel MKL's own. With a click: stage 1's speed
# against a large fp32 product on the same threads, one stage-1 step profiled by phase and operator group, fused
# AdamW against the per-tensor one, a cProfile of one Task 1 run, and every recorded full bench run side by side.

# %% tags=["hide-input", "hide-output"]
for key in ("kernels", "stage1_profile", "optimizer"):
    show(page.levers[key], precision=2)
show(speed.cprofile(page))
show(speed.history_table(page), precision=2)

# %% [markdown]
# ## What we found
#
# - **Targets**: {glue:text}`sp_met` of {glue:text}`sp_judged` met on this machine. Missed, each with its cause in
#   the targets table: {glue:md}`sp_missed`.
# - **The cold book**: {glue:text}`sp_book`, against the book's budget of {glue:text}`sp_budget` min. Timed before
#   today's profile: {glue:md}`sp_stale`.
# - **Where the time goes**: {glue:md}`sp_where`.
# - **The levers**: stacked experts run at {glue:text}`sp_stacked` their separate fits' speed; one thread per worker
#   {glue:text}`sp_stage_threads` as fast as two; cutting the padding {glue:text}`sp_padding`; two stage-1 runs side
#   by side {glue:text}`sp_stage1_side` as fast as one; cached features {glue:text}`sp_features`. Across the
#   recorded bench runs the frozen-prefix speed-up ranged: {glue:text}`sp_agreement`.

# %% tags=["hide-input"]
pages.end(results)
