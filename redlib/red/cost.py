"""What RED costs: parameters and compute per method against the backbone (the one in use and Qwen3-0.6B's shape), and
the time and memory training each page's stages took, as the pages' own runs recorded them (never the bench's file)."""

from __future__ import annotations

import pandas as pd
import torch
from torch import nn

from ..configs.red import RedConfig
from ..core import measure
from ..models.backbone import Backbone
from .types import STAGE_KINDS, code_module, expert_module, residual_module, router_module

# Qwen3-0.6B's published shape, for counting parameters from the configuration alone (no weights).
QWEN3_0_6B = {"vocab_size": 151_936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": True}


# section 4.10.1's complexity count: a full-rank MoE expert d·C against a RED expert d·r + r·C
PAPER_FORMULA = "paper's count d·C / (d·r + r·C)"


def count(module: nn.Module) -> int:
    """Number of parameters of a module."""
    return sum(p.numel() for p in module.parameters())


def _shapes(bb: Backbone) -> list[tuple[str, int, nn.Module, nn.Module]]:
    """(name, d, model, input embeddings) of the backbone in use and of Qwen3-0.6B's shape (built on `meta`)."""
    from transformers import Qwen3Config, Qwen3Model

    with torch.device("meta"):
        qwen = Qwen3Model(Qwen3Config(**QWEN3_0_6B))
    return [(f"{bb.name} ({type(bb.full).__name__})", bb.dim, bb.full, bb.full.get_input_embeddings()),
            ("Qwen3-0.6B shape", QWEN3_0_6B["hidden_size"], qwen, qwen.get_input_embeddings())]


def macs(module: nn.Module) -> int:
    """Multiply-accumulates of one pass of a stack of linear layers over one vector (their weights' sizes)."""
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


def parameter_cost(bb: Backbone, cfg: RedConfig, n_domains: int, n_classes: int, tokens: int) -> pd.DataFrame:
    """Parameters of RED's residuals + router vs the backbone and the MoE's experts; router vs backbone compute."""
    rows = []
    for name, d, model, emb in _shapes(bb):
        with torch.device("meta"):
            residual, router = residual_module(cfg, d), router_module(cfg, d, n_domains)
            expert = expert_module(cfg, d, n_classes)
        backbone, body = count(model), count(model) - count(emb)
        red = n_domains * count(residual) + count(router)
        rows.append({"backbone": name, "d": d, "backbone parameters": backbone,
                     "RED residuals + router (beyond the classifier)": red,
                     "RED share of backbone": red / backbone, "MoE experts": n_domains * count(expert),
                     "MoE / RED expert parameters": count(expert) / count(residual),
                     PAPER_FORMULA: d * n_classes / (cfg.rank(d) * (d + n_classes)),
                     "router share of compute": macs(router) / (body * tokens), "tokens per question": tokens})
    return pd.DataFrame(rows)


def method_cost(bb: Backbone, cfg: RedConfig, n_domains: int, n_classes: int, tokens: int) -> pd.DataFrame:
    """Every method's trained parameters beyond the backbone and its compute per query after the backbone's
    forward, as counts and as shares of the backbone, on the backbone in use and on Qwen3-0.6B's shape."""
    rows = []
    for name, d, model, emb in _shapes(bb):
        K = n_domains
        with torch.device("meta"):
            head, router = nn.Linear(d, n_classes), router_module(cfg, d, K)
            expert, residual = expert_module(cfg, d, n_classes), residual_module(cfg, d)
            code = code_module(cfg, d, n_classes)
        parts = {  # method -> [(module, how many)]
            "global head": [(head, 1)],
            "uniform averaging": [(expert, K)],
            "softmax MoE": [(expert, K), (router, 1)],
            "RED": [(head, 1), (residual, K), (router, 1)],
            "RED code variant": [(head, 1), (code, K), (router, 1)],
        }
        backbone, body_macs = count(model), (count(model) - count(emb)) * tokens
        for method, mods in parts.items():
            n, m = sum(k * count(x) for x, k in mods), sum(k * macs(x) for x, k in mods)
            rows.append({"backbone": name, "method": method, "parameters": n, "share of backbone parameters": n / backbone,
                         "MACs per query": m, "share of backbone compute": m / body_macs})
    return pd.DataFrame(rows)


# page, stage kind, its training seconds, its seconds in all (the sum of its stages': compute, not wall time, where
# workers overlap), runs (seeds x settings), commit and time of the run
TIME_COLUMNS = ["page", "stage", "seconds", "compute_seconds", "runs", "git_commit", "measured_at"]


def time_table(times: pd.DataFrame) -> pd.DataFrame:
    """Training seconds per stage kind (rows) of each page (columns), then its compute in all, runs and commit: many
    stage kinds and few pages, so the table is long rather than wide."""
    if times.empty:
        return pd.DataFrame()
    wide = times.pivot_table(index="page", columns="stage", values="seconds", sort=False)
    info = times.groupby("page", sort=False)[["compute_seconds", "runs", "git_commit"]].first()
    long = wide.join(info).T.astype(object)
    long.index = [f"{STAGE_KINDS.get(k, k.replace('_', ' '))}, s" if k in wide.columns else k.replace("_", " ")
                  for k in long.index]  # a stage kind by what it holds ("global head on all of train, s")
    return long.rename_axis("stage / page")


def _shares(mix: str | None) -> dict[int, float]:
    """A step mix's share per number of operations ('1:0.5,2:0.5' -> {1: 0.5, 2: 0.5}); {} for none."""
    return {int(k): float(v) for k, v in (part.split(":") for part in str(mix).split(","))} if mix else {}


def timed_runs(params: dict) -> int:
    """Runs a page made, from its recorded parameters: n_seeds on the claims' setting, `stage1_beside_seeds` on the
    stage-1 extension, `split_seeds` on each other split, and `extension_seeds` on each digit variant and on Task 2's
    other step mix (a parameter a run predates counts as it did then: n_seeds on the stage-1 extension,
    `extension_seeds` on every extension)."""
    n = int(params.get("n_seeds") or 1)
    each = int(params.get("extension_seeds") or n)
    splits = [v for v in str(params.get("splits_reported") or "none").split(",") if v != "none"]
    digits = [v for v in str(params.get("digits_variant_on") or "none").split(",") if v != "none"]
    beside = bool(params.get("stage1_paper_beside")) and str(params.get("head_lr_grid")) != "none"
    other = params.get("mix_variant")  # Task 2's other step mix, compared by its shares ("1:0.5" is "1:0.50")
    mix = other not in (None, "none") and _shares(other) != _shares(params.get("step_mix"))
    return (n + beside * int(params.get("stage1_beside_seeds") or n) + max(0, len(splits) - 1)
            * int(params.get("split_seeds") or each) + (len(digits) + mix) * each)


def claims(c: pd.DataFrame, times: pd.DataFrame, peaks: pd.Series, backbone: str) -> dict[str, dict]:
    """eff.*: parameter and compute shares (judged on Qwen3-0.6B's shape, exact from its configuration), the
    training time the pages' runs recorded (`times`) and their peak memory in their last cold runs (`peaks`, GiB per
    page: the bench's `cold_peaks`), on this machine's CPU with the embedded backbone."""
    c = c.set_index("backbone")
    here, qwen = c.iloc[0], c.loc["Qwen3-0.6B shape"]
    exact = "exact (counted from the shapes, no seed)"
    out = {"eff.params": measure.bound([qwen["RED share of backbone"]], 0.0, 0.01, measure="on Qwen3-0.6B's shape",
                                       embedded_backbone=float(here["RED share of backbone"]), spread=exact),
           "eff.router_flops": measure.bound([here["router share of compute"]], 0.0, 0.005, backbone=backbone,
                                             qwen3_0_6b_shape=float(qwen["router share of compute"]), spread=exact)}
    ratio = float(qwen["MoE / RED expert parameters"])
    paper_ratio = float(qwen[PAPER_FORMULA]) if PAPER_FORMULA in qwen else None  # tables from before this column
    out["eff.red_vs_moe_params"] = measure.order(
        [ratio >= 10], ratio >= 10, value=ratio, measure="on Qwen3-0.6B's shape",
        claim_needs="a ratio of at least 10 (one order of magnitude)",
        embedded_backbone=float(here["MoE / RED expert parameters"]),
        extensions={"the paper's own count, d·C against d·r + r·C (Qwen3-0.6B's shape)": measure.order(
            [paper_ratio >= 10], paper_ratio >= 10, value=paper_ratio)} if paper_ratio is not None else {})
    t1 = times[times["page"] == "task1_addition"]
    if len(t1):
        runs = int(t1["runs"].iloc[0])
        s = t1.set_index("stage")["seconds"]
        part = lambda *k: float(s.reindex(list(k)).fillna(0).sum()) / runs  # noqa: E731
        value = {"total_hours": float(t1["seconds"].sum()) / runs / 3600,
                 "base_hours": part("prefix", "stage1", "features") / 3600, "experts_minutes": part("expert") / 60,
                 "router_red_hours": part("router", "residual") / 3600}
        out["eff.train_time"] = {"value": value, "per_seed": [value], "runs_timed": runs,
                                 "measure": "compute per seed and setting of Task 1 (every stage's recorded training "
                                            "seconds), this machine's CPU, the embedded backbone (the paper: Qwen3-0.6B "
                                            "on an RTX 3060 Ti)",
                                 "git_commit": t1["git_commit"].iloc[0]}
    if len(peaks):
        out["eff.peak_memory"] = measure.bound([float(peaks.max())], 0.0, 6.5, measure="GiB, the largest page's peak "
                                               "memory (its kernel and workers at once, in its last cold full-profile "
                                               "run) on CPU (the paper: accelerator memory)", page=str(peaks.idxmax()),
                                               spread="one measurement (a cold run of each page)",
                                               per_page={k: float(v) for k, v in peaks.items()})
    return out
