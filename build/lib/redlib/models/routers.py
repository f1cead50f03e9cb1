"""Routers: map pooled features to mixing weights over the experts."""

from __future__ import annotations

from torch import Tensor, nn


class Router(nn.Module):
    """alpha(x) = softmax(MLP(h)): the paper's two-layer MLP router (hidden 256), trained on range labels."""

    def __init__(self, d: int, n_experts: int, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, n_experts))

    def logits(self, h: Tensor) -> Tensor:
        """Unnormalised routing scores (N, K), for the cross-entropy on range labels."""
        return self.net(h)

    def forward(self, h: Tensor) -> Tensor:
        return self.net(h).softmax(-1)
