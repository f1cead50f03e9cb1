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
# # Routing heatmaps: do MoE routers find pretrained experts?
#
# **The paper's question** (its three routing-analysis experiments, written up apart from the main
# text): RED trains a router *after* the experts, on the domains they were trained for. Would a
# classical softmax-gated mixture of experts, trained end to end, discover by itself which expert
# knows what? The paper plants a specialist among the experts and looks at where the gate sends
# inputs:
#
# 1. **a code expert**: one Transformer expert pretrained on code alone, then expert 0 of a
#    4-expert token-level MoE language model trained on code, math, story and science text;
# 2. **a "0 or 7" expert**: one MLP pretrained to tell digits 0 and 7 from the rest, then (body
#    only) expert 0 of a 4-expert MoE classifying all ten digits;
# 3. **lightly pretrained domain experts**: four experts, each trained two epochs on its own domain
#    (psychology, history, medicine, business), then combined by a token-level MoE, over 3 seeds,
#    with and without an entropy term on the router.
#
# The paper reports these as heatmaps without numbers; its claims ledger states each as an
# ordering: the planted expert gets more of its own domain's routing than of the others'.

# %% [markdown]
# :::{admonition} The answer
# :class: tip
# A pretrained code expert takes {glue:text}`ra_code_share:.3f` of the routing weight on code, against
# {glue:text}`ra_other_low:.3f`-{glue:text}`ra_other_high:.3f` on the other domains. By the ledger's rule, the
# claim that the router finds the code expert: **{glue:text}`ra_v_ra_code_expert`**; that it finds the '0 or 7'
# expert: **{glue:text}`ra_v_ra_mnist07`**; that each domain's own expert is its top choice:
# **{glue:text}`ra_v_ra_domain_match`**.
# :::

# %% tags=["parameters", "remove-cell"]
profile = "full"  # "smoke" (seconds, for CI) or "full" (the published page)
seed = 0  # first seed; the run uses seed, seed+1, ..., seed+n_seeds-1
device = "cpu"  # "cpu", "cuda", "cuda:N", "mps" or "auto"
results_dir = "results"  # results go to <results_dir>/<profile>/routing_heatmaps/
n_seeds = None  # (the paper: 1, 1 and 3 for the three experiments); None: the profile's value (smoke 2, full 3)
tokenizer = "embedded"  # "embedded" (the MiniLM backbone's tokenizer) or a local tokenizer folder such as gpt2
full_vocab = False  # False: embeddings and LM head cover the tokens that occur in the corpus only
causal = True  # causal attention mask in the text experts (False: the paper's unmasked encoder)
max_len = 128  # tokens per sample at most (the paper: 128)
text_lr = 0.0001  # Adam learning rate of the text models (the paper: 1e-4)
text_batch = 16  # text batch size (the paper does not say)
eval_samples = None  # held-out samples per domain for the routing analysis; None: the profile's value (smoke 10, full 100)
code_samples = None  # experiment 1 training samples per domain (the paper: 500); None: the profile's value (smoke 40, full 500)
code_epochs = None  # experiment 1 epochs of each phase (the paper: 5); None: the profile's value (smoke 1, full 5)
code_d_model = None  # experiment 1 width (the paper: 768); None: the profile's value (smoke 32, full 128)
code_layers = 2  # experiment 1 layers per expert (the paper: 2)
code_heads = None  # experiment 1 attention heads (the paper: 8); None: the profile's value (smoke 2, full 4)
code_ff = None  # experiment 1 feed-forward width (the paper: 3072); None: the profile's value (smoke 64, full 512)
mnist_data_dir = None  # None: the embedded 5,000 digits; or a folder of the MNIST IDX files
digit_lr = 0.001  # experiment 2 Adam learning rate (the paper: 1e-3)
digit_batch = 64  # experiment 2 batch size (the paper does not say)
digit_hidden = 128  # experiment 2 expert hidden width (the paper: 128)
digit_dropout = 0.2  # experiment 2 dropout in experts and gate (the paper: 0.2)
digit_pretrain_epochs = None  # experiment 2 expert pretraining epochs (the paper: 10); None: the profile's value (smoke 1, full 10)
digit_epochs = None  # experiment 2 MoE epochs (the paper: 15); None: the profile's value (smoke 2, full 15)
domain_pretrain_samples = None  # experiment 3 pretraining samples per domain; None: the profile's value (smoke 20, full 300)
domain_moe_samples = None  # experiment 3 MoE samples per domain; None: the profile's value (smoke 40, full 600)
domain_pretrain_epochs = None  # experiment 3 expert pretraining epochs (the paper: 2); None: the profile's value (smoke 1, full 2)
domain_moe_epochs = None  # experiment 3 MoE epochs (the paper: 6); None: the profile's value (smoke 1, full 6)
domain_d_model = None  # experiment 3 width (the paper: 256); None: the profile's value (smoke 32, full 128)
domain_layers = 1  # experiment 3 layers per expert (the paper: 1)
domain_heads = 4  # experiment 3 attention heads (the paper: 4)
domain_ff = 512  # experiment 3 feed-forward width (the paper: 512)
domain_embedding = "random"  # MoE embeddings: "random" or "average" of the pretrained experts' (the paper: either)
entropy_weight = 0.01  # weight of the router entropy term in the second setting of experiment 3
converge_cap = None  # extension, first seed: every phase trained until its validation loss stops improving (patience 3), at most this many epochs; 0: not run; None: the profile's value (smoke 2, full 60)
stop_patience = None  # None: every epoch run (the paper's fixed epochs); or stop after this many epochs without a better validation loss

# %% tags=["hide-input", "remove-stderr"]
from IPython.display import display

from redlib.book import pages, parameters, plots, routing_plots
from redlib.experiments import routing_heatmaps as ra
from redlib.experiments import routing_heatmaps_report as rr
from redlib.tasks import text_domains as td

cfg, results, store = pages.begin("routing_heatmaps", globals())


# %% tags=["remove-input", "hide-output"]
parameters.this_run(cfg)
# %% [markdown]
# ## Setup
#
# **Text.** Each domain is a handful of sentence templates whose slots (names, numbers, words) are
# filled at random, as the paper describes its data; a seed draws its own texts. The paper tokenized
# with GPT-2's tokenizer, which cannot be downloaded here: by default we use the tokenizer shipped
# with the embedded MiniLM backbone (WordPiece, lower-cased), and `tokenizer` takes a local `gpt2`
# folder. By default the embedding and the LM head cover only the token ids that occur in the
# generated corpus (a few hundred) rather than the whole tokenizer (30,522 ids for MiniLM, 50,257 for
# GPT-2): rows of tokens that never occur are never read by the routing analysis, and the smaller
# head saves time (`full_vocab=True` restores them).
#
# **The token-level MoE** is the paper's: GPT-2 style embeddings (token plus learned position),
# $N = 4$ Transformer-encoder experts that each see every token, a router (two-layer ReLU network on
# each token's embedding) giving a softmax over the experts, the experts' outputs summed with those
# weights, and a linear LM head trained on next-token cross-entropy with padding masked. One change,
# said plainly: the paper's encoder experts attend in both directions, so every token can see the
# token it must predict; here they are **causally masked**, so next-token prediction is not trivial
# (`causal=False` gives the paper's unmasked encoder). Training follows the paper: Adam at
# `text_lr`, the weights of the best validation epoch kept (10% more samples per domain held out
# for that), the routing measured on `eval_samples` further held-out samples per domain.
#
# **Sizes.** The full profile keeps the paper's data sizes, epochs and learning rates; the model
# sizes differ where the page's 8-minute budget on a 2-core CPU requires it:

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
plots.styled(rr.sizes(cfg), hide_index=True, caption="Model and data sizes: this run against the paper's")

# %% [markdown]
# One sample of each domain (first seed):

# %% tags=["hide-input"]
# NBVAL_CHECK_OUTPUT
plots.styled(rr.examples(cfg), hide_index=True, caption="One generated example per domain")

# %% [markdown]
# ## Experiment 1: a pretrained code expert
#
# Phase 1 trains one expert, with its own embeddings and LM head, on the code samples alone. Phase 2
# builds the 4-expert MoE with expert 0 and the embeddings loaded from phase 1 (the other experts,
# the router and the head fresh) and trains all of it on the four domains.

# %% tags=["hide-input", "remove-stderr"]
t = ra.run(cfg, store)  # the three experiments on every seed (and the first seed trained longer, where asked)
results.tables.update(t)  # written as CSV files by pages.end
code_table, digit_table, contrast = t["code_routing"], t["digit_routing"], t["digit_contrast"]
domain_table, match, epochs = t["domain_routing"], t["domain_match"], t["epochs"]

# %% [markdown]
# The routing heatmap: the average routing weight each expert receives on the held-out samples of
# each domain (each sample's tokens averaged, padding excluded; then samples, then seeds). The
# share of tokens for which each expert is the top choice is beside it.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Experiment 1: mean routing weight and top-1 token share per domain and expert, held-out samples, mean over seeds. Expert 0 is the pretrained code expert.", "name": "fig-ra-code"}, "image": {"alt": "Two heatmaps of routing per domain and expert for the code-expert MoE"}}
routing_plots.routing_heatmaps({"mean routing weight": rr.heat(code_table, "weight"),
                        "share of top-1 tokens": rr.heat(code_table, "token share")},
                       "Experiment 1: where the router sends each domain");

# %% [markdown]
# Expert 0's share per domain (mean and standard deviation over seeds):

# %% tags=["hide-input"]
plots.styled(rr.expert0(code_table), caption="Experiment 1: expert 0's routing share per domain, mean and sd over seeds")

# %% [markdown]
# The token-level view (first seed): each token of a held-out code sample and story sample, coloured
# by the expert with the highest routing weight, with that weight.

# %% tags=["hide-input"] mystnb={"figure": {"caption": "Experiment 1, first seed: the top expert of each token of a held-out code and story sample.", "name": "fig-ra-tokens"}, "image": {"alt": "Tokens of two samples in boxes coloured by their top expert"}}
routing_plots.token_routes({name: v.reset_index(drop=True) for name, v in t["token_views"].groupby("sample", sort=False)}, 4);

# %% [markdown]
# ## Experiment 2: a pretrained "0 or 7" digit expert
#
# Phase 1 trains an MLP (784-128-128-2, ReLU, dropout 0.2) to say whether a digit is a 0 or a 7,
# 10 epochs with Adam at 1e-3, the best validation epoch kept. Phase 2 builds the MoE: four MLP
# experts (784-128-128-10) and a 784-256-128-4 gating network with dropout, expert 0's input and
# hidden layers copied from phase 1 (its output layer fresh), trained 15 epochs on all ten classes.
# The digits are the embedded 5,000 (4,000 to train, 500 to validate, 500 to test) unless
# `mnist_data_dir` points at full MNIST.

# %% tags=["hide-input", "remove-stderr"]
# %% tags=["hide-input"] mystnb={"figure": {"caption": "Experiment 2: share of test digits whose top expert is each expert, and mean gate weight, per digit (mean over seeds). Expert 0 holds the pretrained '0 or 7' body.", "name": "fig-ra-digits"}, "image": {"alt": "Two heatmaps of gate routing per digit and expert"}}
routing_plots.routing_heatmaps({"share of test digits (top expert)": rr.heat(digit_table, "top share", "digit"),
                        "mean gate weight": rr.heat(digit_table, "weight", "digit")},
                       "Experiment 2: where the gate sends each digit");

# %% [markdown]
# Expert 0's usage on digits 0 and 7 against the other digits, per seed (the paper's ratio and
# difference):

# %% tags=["hide-input"]
plots.styled(contrast, hide_index=True, caption="Experiment 2: expert 0 as top expert on digits 0 and 7 against the others, per seed")

# %% [markdown]
# ## Experiment 3: lightly pretrained domain experts
#
# Each expert is pretrained two epochs on 300 samples of its own domain, with its own embeddings and
# head; the MoE loads the four experts (embeddings `domain_embedding`, router and head fresh) and
# trains 6 epochs on 2,400 mixed samples. The second setting adds to the loss the router's
# entropy term, $-\lambda H(\bar\alpha)$ with $\bar\alpha$ the mean routing weights over a batch's
# tokens, which rewards using every expert (the paper's "encourage diverse routing"; it gives no
# formula). Both settings start from the same pretrained experts.

# %% tags=["hide-input", "remove-stderr"]
# %% tags=["hide-input"] mystnb={"figure": {"caption": "Experiment 3: share of each domain's held-out tokens whose top expert is each expert, without and with the entropy term (mean over seeds). Expert i was pretrained on the i-th domain.", "name": "fig-ra-domains"}, "image": {"alt": "Two heatmaps of token routing per domain and expert for the domain-expert MoE"}}
names = [f"E{i} {d[:4]}." for i, d in enumerate(td.EXPERIMENT_DOMAINS["domains"])]
routing_plots.routing_heatmaps({st: rr.heat(domain_table[domain_table["setting"] == st], "token share", names=names)
                        for st in dict.fromkeys(domain_table["setting"])},
                       "Experiment 3: share of tokens routed to each expert", label="token share");

# %% [markdown]
# The share of each domain's tokens that go to the domain's own expert, mean and standard deviation
# over seeds (the per-seed numbers are in `domain_match.csv`, the whole routing in
# `domain_routing.csv`):

# %% tags=["hide-input"]
plots.styled(match.groupby(["setting", "domain"], sort=False)["token share"].agg(["mean", "std"]).unstack(0),
             caption="Experiment 3: share of each domain's tokens routed to its own expert, mean and sd over seeds")

# %% [markdown]
# Every stage's epochs, the epoch whose weights were kept (counted from 0) and its validation loss
# (click to show):

# %% tags=["hide-input"]
improving = int(epochs["still improving at the cap"].sum())
plots.behind_click(plots.styled(epochs.drop(columns="cached"), hide_index=True,
                                caption="Every stage's epochs, kept epoch and validation loss"),
                   f"Every stage's epochs: {len(epochs)} stages, {improving} still improving at their last epoch")

# %% [markdown]
# ## Extension: every phase trained longer
#
# The paper trains fixed epochs (5 and 5; 10 and 15; 2 and 6); the table above counts the stages still improving at
# their last epoch on our runs. The claims are judged on the paper's
# epochs, as the paper ran them; whether the routing survives more training is our question. The
# first seed again, every phase until its validation loss has not improved for 3 epochs or until
# `converge_cap` epochs, all else unchanged; the table counts the stages still improving at that cap:

# %% tags=["hide-input", "remove-stderr"]
converged = ra.converged(t)
if converged is not None:
    display(plots.styled(converged["epochs"].drop(columns="cached"), hide_index=True,
                         caption="Extension, first seed: every stage's epochs, trained longer (the cap: converge_cap)"))

# %% [markdown]
# (ra-claims)=
# ## The paper's routing claims against our runs
#
# Each claim is an ordering, checked per seed: expert 0's mean routing weight is higher on code than
# on every other domain; expert 0 is the top expert more often for digits 0 and 7 than for the
# others; each domain's own expert is the top choice for more than half of that domain's tokens
# (judged without the entropy term, the paper's base setting; with it, beside it as an extension).

# %% tags=["hide-input"]
pages.claims_table(results, ra.claims(cfg, t))

# %% tags=["remove-cell"]
pages.glue_found(results, ra.found, cfg, t)

# %% [markdown]
# ## What we found
#
# - **Code expert** ({glue:text}`ra_n_seeds`, models {glue:text}`ra_code_sizes` sizes): expert 0 takes
#   on average {glue:text}`ra_code_share:.3f` of the routing weight on held-out code samples, against
#   {glue:text}`ra_other_low:.3f`-{glue:text}`ra_other_high:.3f` on the other domains (uniform would be
#   0.25). Its smallest share on any domain is {glue:text}`ra_any_low:.3f`: above
#   {glue:text}`ra_majority` it takes most of the weight on every domain: the router favours the expert that
#   arrived trained, whatever the input. `ra.code_expert` **{glue:text}`ra_v_ra_code_expert`**.
# - **'0 or 7' expert** ({glue:text}`ra_n_seeds`, MoE test accuracy {glue:text}`ra_moe_acc:.3f`):
#   expert 0 is the top expert for {glue:text}`ra_07:.3f` of test digits 0 and 7 and for
#   {glue:text}`ra_other_digits:.3f` of the others (ratio {glue:text}`ra_ratio:.2f`, difference
#   {glue:text}`ra_difference:+.3f`; per seed the ratio runs from {glue:text}`ra_ratio_low:.2f` to
#   {glue:text}`ra_ratio_high:.2f`). `ra.mnist07` **{glue:text}`ra_v_ra_mnist07`**.
# - **Domain experts** ({glue:text}`ra_n_seeds`, models {glue:text}`ra_domain_sizes` sizes): the share
#   of each domain's tokens routed to its own expert is {glue:text}`ra_own_plain` without entropy
#   regularisation and {glue:text}`ra_own_entropy` with weight {glue:text}`ra_entropy_weight` (uniform
#   routing would give 0.25). In {glue:text}`ra_one_top` of {glue:text}`ra_runs` runs (seeds x settings) a
#   single expert is the top choice of all four domains (none would, were routing by domain). `ra.domain_match` **{glue:text}`ra_v_ra_domain_match`** (judged without regularisation).
# - **Trained longer** (an extension, first seed; epochs run: {glue:text}`ra_converged_epochs`). Each claim's
#   ordering on that seed (against the paper's epochs): {glue:text}`ra_converged_first`; one seed is no verdict.

# %% tags=["hide-input"]
pages.end(results)
