"""What RED costs: parameters and compute per method against the backbone (the one in use and Qwen3-0.6B's shape), and
the time and memory training each page's stages took, as the pages' own runs recorded them (never the bench's file)."""

from __future__ import annotations

import pandas as pd
import torch
from torch import nn

from ..configs.red import RedConfig
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
