"""What RED costs: parameters of its residuals and router against the backbone and a MoE's experts, router compute."""

from __future__ import annotations

import pandas as pd
import torch
from torch import nn

from ..models.backbone import Backbone
from .pipeline import RedConfig

# Qwen3-0.6B's published shape, for counting parameters from the configuration alone (no weights).
QWEN3_0_6B = {"vocab_size": 151_936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": True}


def count(module: nn.Module) -> int:
    """Number of parameters of a module."""
    return sum(p.numel() for p in module.parameters())


def parameter_cost(bb: Backbone, cfg: RedConfig, n_domains: int, n_classes: int, tokens: int) -> pd.DataFrame:
    """Parameters of RED's residuals + router vs the backbone and the MoE's experts; router vs backbone compute."""
    from transformers import Qwen3Config, Qwen3Model

    with torch.device("meta"):
        qwen = Qwen3Model(Qwen3Config(**QWEN3_0_6B))
    shapes = [(f"{bb.name} ({type(bb.full).__name__})", bb.dim, bb.full, bb.full.get_input_embeddings()),
              ("Qwen3-0.6B shape", QWEN3_0_6B["hidden_size"], qwen, qwen.get_input_embeddings())]
    rows = []
    for name, d, model, emb in shapes:
        with torch.device("meta"):
            residual, router, expert = cfg.residual(d), cfg.router(d, n_domains), cfg.expert(d, n_classes)
        backbone, body = count(model), count(model) - count(emb)
        red = n_domains * count(residual) + count(router)
        router_macs = count(router) - sum(m.out_features for m in router.modules() if isinstance(m, nn.Linear))
        rows.append({"backbone": name, "d": d, "backbone parameters": backbone, "RED residuals + router": red,
                     "RED share of backbone": red / backbone, "MoE experts": n_domains * count(expert),
                     "MoE / RED expert parameters": count(expert) / count(residual),
                     "router share of compute": router_macs / (body * tokens), "tokens per question": tokens})
    return pd.DataFrame(rows)
