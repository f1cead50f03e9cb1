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


class ProbMixture(nn.Module):
    """p(y|x) = sum_i alpha_i softmax(E_i(h)): uniform averaging, oracle and softmax-gated MoE differ only in alpha."""

    def __init__(self, experts: Sequence[nn.Module]):
        super().__init__()
        self.experts = nn.ModuleList(experts)

    def forward(self, h: Tensor, alpha: Tensor) -> Tensor:
        """The mixture's probabilities (N, C), summed in the experts' float32: saturated experts can tie here."""
        probs = torch.stack([e(h).softmax(-1) for e in self.experts], 1)  # (N, K, C)
        return torch.einsum("nk,nkc->nc", alpha, probs)

    def log_probs(self, h: Tensor, alpha: Tensor) -> Tensor:
        """log p(y|x) = logsumexp_i(log softmax(E_i h) + log alpha_i), (N, C): the mixture in log space, where
        saturated experts keep their differences (a zero weight gives -inf, which logsumexp skips)."""
        log_p = torch.stack([e(h).log_softmax(-1) for e in self.experts], 1)  # (N, K, C)
        return (log_p + alpha.log()[:, :, None]).logsumexp(1)


class ResidualMixture(nn.Module):
    """RED as the paper writes it: p(y|x) = softmax(W_c (h + sum_i alpha_i Delta h_i(h)))."""

    def __init__(self, residuals: Sequence[nn.Module], classifier: nn.Module):
        super().__init__()
        self.residuals, self.classifier = nn.ModuleList(residuals), classifier

    def logits(self, h: Tensor, alpha: Tensor) -> Tensor:
        """Logits of the corrected hidden state."""
        deltas = torch.stack([r(h) for r in self.residuals], 1)  # (N, K, d)
        return self.classifier(h + torch.einsum("nk,nkd->nd", alpha, deltas))

    def forward(self, h: Tensor, alpha: Tensor) -> Tensor:
        return self.logits(h, alpha).softmax(-1)


class LogitMixture(nn.Module):
    """RED as the released code does it: logits = W_c h + scale * sum_i alpha_i E_i(h)."""

    def __init__(self, experts: Sequence[nn.Module], classifier: nn.Module, scale: float = 0.1):
        super().__init__()
        self.experts, self.classifier, self.scale = nn.ModuleList(experts), classifier, scale

    def logits(self, h: Tensor, alpha: Tensor) -> Tensor:
        """Base logits plus the scaled, routed sum of expert logits."""
        extra = torch.stack([e(h) for e in self.experts], 1)  # (N, K, C)
        return self.classifier(h) + self.scale * torch.einsum("nk,nkc->nc", alpha, extra)

    def forward(self, h: Tensor, alpha: Tensor) -> Tensor:
        return self.logits(h, alpha).softmax(-1)
