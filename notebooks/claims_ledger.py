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
# (ledger)=
# # Claims ledger
#
# Every quantitative claim of the paper (`paper/paper_claims.yaml`), the paper's number, the
# number this book measured (read from the result files the notebooks wrote, mean over seeds),
# and a verdict computed by rule from the claim's kind:
#
# - **value**: holds when every seed lies within 0.05 of the paper's number (for per-range lists and
#   per-case claims: every number of every seed); partly when some do; the row says whether ours lie above
#   or below the paper's;
# - **order**: holds when every compared pair is decided the claimed way by paired seeds: the mean
#   per-seed difference must exceed its sample standard deviation by at least 0.01, a minimum effect fixed
#   before any run; a smaller difference is a **tie** (partly), one decided the other way does not hold.
#   A tie whose two sides both score 0.995 or above cannot show an order either way: an order whose only
#   ties are such is **untestable here**, whatever its decided pairs say. Orders measured without paired
#   scores hold in every seed, or partly in some seeds or the mean;
# - **bound**: holds when every seed lies inside the stated range; partly when some do. "The only method
#   above 0.80 in every range" also needs every other method's lowest range below 0.80.
#
# Two verdicts say the claim could not be judged here, and count apart: **untestable here** (a claim that
# compares methods or measures an effect, where every value it compares is 0.995 or above, whichever way
# it would be decided: at that ceiling it cannot show either way; a claim about one method's value is
# judged as a value, ceiling or not) and **not comparable** (training hours and peak memory measured on a
# 2-core CPU with MiniLM, against the paper's GPU with Qwen3-0.6B: our figure is shown, no verdict drawn).
#
# Claims no notebook measures yet say **not measured**. Each measured row links to the section
# of the page that measured it. Every verdict is judged under the paper's own protocol; where we
# also measure a claim another way (Task 1's unseen-pairs split, say), that *extension* is shown in
# the row with what the same rule would say of it, and never decides the verdict.

# %% tags=["parameters", "remove-cell"]
profile = "full"  # which results to read: results/<profile>/
results_dir = "results"  # where the notebooks wrote their results

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
from IPython.display import HTML, Markdown, display

from redlib.book import ledger, ledger_html, pages, plots

cfg, results = pages.start("claims_ledger", globals())
collected, table, counts = ledger.view(cfg)
results.table("ledger", table)
display(HTML(ledger_html.summary_html(counts)))

# %% [markdown]
# ## Verdicts that changed since the previous publication
#
# Every claim whose verdict moved since the previous publication, with its cause, under the rules above.

# %% tags=["hide-input"]
from redlib.core.paths import project_root

moved = ledger.changes(table, project_root() / "results" / "verdicts_before.csv", collected)
results.table("changes", moved)
if len(moved):
    display(plots.behind_click(plots.styled(moved, hide_index=True, caption="Verdicts that changed, and why"),
                               f"{len(moved)} verdicts changed: each with its cause"))
else:
    display(Markdown("No verdict changed."))

# %% [markdown]
# ## Every claim

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
display(HTML(ledger_html.sections_html(table)))

# %% tags=["hide-input"]
pages.end(results)
