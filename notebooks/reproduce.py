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
# (reproduce)=
# # Reproduce it
#
# ## The two commands
#
# ```bash
# make book   # every notebook executed (full profile), then the HTML book
# make test   # unit tests, smoke notebooks under nbval, strict build, browser check
# ```
#
# Both install into `.venv` first if needed. `make book PROFILE=smoke` builds a quick version (tiny data;
# its cold time is on the "Speed and memory" page) in `_build/smoke/`.
# The install puts torch 2.13.0 first (a CPU build), then `pip install -e ".[dev]"`; `environment.yml`
# describes the same dependencies for conda or Binder.
#
# ## One notebook, other parameters
#
# ```bash
# .venv/bin/python -m redlib run task1_addition -p seed 3 -p n_seeds 1 -p split iid \
#     --output /tmp/t1.ipynb
# .venv/bin/python -m redlib run toy_experiments -p profile smoke --output /tmp/toy.ipynb
# ```
#
# Every parameter is checked against the notebook's configuration before a kernel starts: an unknown
# name, a wrong type, an unknown profile or value, or a backbone folder that does not exist is a
# one-line error naming what is allowed (CONTRIBUTING.md's table lists what is checked where). With `--output`
# the results go beside the notebook; a full-profile run with parameters other than the defaults
# replaces this book's page only with `--publish`, and then says so in its provenance box. Trained
# stages are cached in `cache/` under the hash of what produced them, so a re-run with the same
# configuration loads them (delete `cache/` to retrain from scratch). A parameter left at `None` takes its profile's value. The reading pages
# (ledger, front matter) take only `profile`, `seed`, `device` and `results_dir` and train nothing.

# %% tags=["parameters", "remove-cell"]
profile = "full"  # which results to read: results/<profile>/
results_dir = "results"  # where the notebooks wrote their results

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
import pandas as pd
from IPython.display import HTML, display

from redlib.book import pages, parameters, plots, registry
from redlib.book.results import in_history, read

cfg, results = pages.start("reproduce", globals())
params = parameters.parameter_table()
results.table("parameters", params)
plots.styled(parameters.common_table(params), hide_index=True,
             caption="The parameters a reader changes most, across the notebooks")

# %% [markdown]
# Every notebook's full list (its description, type, default, smoke and full values, allowed values) is one
# click away:

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
display(HTML(parameters.by_notebook_html(params)))

# %% [markdown]
# ## Expected CPU wall time
#
# From the provenance of the results this book shows: the wall time of each notebook's last run,
# and how many of its trained stages that run computed rather than loaded from the cache (a run
# that loaded everything is not a measure of training time). The cold time of each page, from an empty
# stage cache, is on {doc}`speed_and_memory`.
# The commit column says whether the code that ran is in this repository's history: a page run at a commit
# that never landed (a session cut off before its CI passed) says so, and its numbers wait for a re-run.

# %% tags=["hide-input"]
rows = []
for name in registry.NOTEBOOKS:
    res = read(name, cfg.profile, cfg.results_dir)
    if res.exists:
        p = res.provenance
        st = p.get("stages") or {}
        rows.append({"notebook": name, "wall seconds": p["wall_seconds"], "stages computed": st.get("computed"),
                     "stages loaded": st.get("loaded_from_cache"), "seeds": len(p["seeds"]),
                     "machine": f"{p['machine']['processor']}, {p['machine']['cpu_count']} CPUs",
                     "started": p["started_at"], "commit": p["git_commit"][:7],
                     "in history": in_history(p["git_commit"])})
walltimes = pd.DataFrame(rows)
results.table("wall_times", walltimes)
plots.styled(walltimes, precision=1, hide_index=True, caption="Each page's last run")

# %% [markdown]
# ## On a GPU, or with the paper's backbone
#
# Pass `-p device cuda` (or `auto`) and, for the paper's backbone, a local copy of Qwen3-0.6B:
# `-p backbone /path/to/Qwen3-0.6B`. The backbone code handles decoders (Qwen/Llama-like `layers`)
# and encoders (BERT-like `encoder.layer`) alike, with mean pooling over the attention mask and the
# top `k_trainable` blocks trained; the decoder path is tested on a small random Qwen3. Stage 1 (the
# backbone's top blocks and the global head) runs at the paper's batch size and stopping rule, with a longer cap and
# patience where our backbone needs them (each page's parameters say which). Nothing is downloaded at run time: the
# Hugging Face hub is kept offline.

# %% tags=["hide-input"]
pages.end(results)
