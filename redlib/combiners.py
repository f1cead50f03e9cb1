"""Ways to combine independently trained experts: parameter averaging, weighted output mixing."""

from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import Tensor, nn


def average_parameters(models: Sequence[nn.Module]) -> nn.Module:
    """A copy of models[0] whose every parameter and buffer is the mean over `models`."""
    if not models:
        raise ValueError("average_parameters needs at least one model")
    out = copy.deepcopy(models[0])
    states = [m.state_dict() for m in models]
    out.load_state_dict({k: torch.stack([s[k].float() for s in states]).mean(0).to(states[0][k].dtype) for k in states[0]})
    return out


class OutputMixture(nn.Module):
    """y(x) = sum_i alpha_i f_i(x) with fixed weights alpha (uniform by default)."""

    def __init__(self, models: Sequence[nn.Module], alpha: Sequence[float] | None = None):
        super().__init__()
        self.models = nn.ModuleList(models)
        w = torch.full((len(models),), 1.0 / len(models)) if alpha is None else torch.as_tensor(alpha, dtype=torch.float32)
        self.register_buffer("alpha", w)

    def forward(self, x: Tensor) -> Tensor:
        outs = torch.stack([m(x) for m in self.models])  # (K, N, d_out)
        return torch.einsum("k,k...->...", self.alpha, outs)
