"""Routing perturbed at test time: noise on a gate's logits, inputs sent to a wrong expert, weights flattened
toward uniform, an expert removed. Each returns routing weights alpha (N, K) to pass to a method as its
`alpha` override (`methods.Method`), so every method is perturbed the same way.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.runtime import generator

PERTURBATIONS = ("logit noise", "misrouted (random expert)", "misrouted (adjacent expert)", "flattened")


def noisy_logits(logits: Tensor, sigma: float, seed: int) -> Tensor:
    """softmax(z + sigma * sd(z) * eps), eps ~ N(0, 1): noise in units of the gate's own logit spread (N, K)."""
    eps = torch.randn(logits.shape, generator=generator(seed)).to(logits.device)
    return (logits + sigma * logits.std() * eps).softmax(-1)


def misroute(alpha: Tensor, fraction: float, seed: int, adjacent: bool = False) -> Tensor:
    """For a random `fraction` of the inputs, the top expert's weight swapped with a wrong expert's: any other
    (uniformly), or, with `adjacent`, a neighbouring domain (k - 1 or k + 1, at random where both exist)."""
    n, K = alpha.shape
    g = generator(seed)
    rows = torch.randperm(n, generator=g)[:round(fraction * n)].to(alpha.device)
    top = alpha[rows].argmax(-1)
    if adjacent:
        step = torch.where(torch.rand(len(rows), generator=g).to(alpha.device) < 0.5, -1, 1)
        step = torch.where(top == 0, 1, torch.where(top == K - 1, -1, step))
        wrong = top + step
    else:  # one of the K - 1 other experts, uniformly
        wrong = (top + torch.randint(1, K, (len(rows),), generator=g).to(alpha.device)) % K
    out = alpha.clone()
    out[rows, top], out[rows, wrong] = alpha[rows, wrong], alpha[rows, top]
    return out


def flatten(alpha: Tensor, amount: float) -> Tensor:
    """(1 - amount) * alpha + amount / K: 0 leaves the routing as it is, 1 is uniform averaging."""
    return (1 - amount) * alpha + amount / alpha.shape[1]


def remove(alpha: Tensor, expert: int) -> Tensor:
    """Expert `expert`'s weight set to zero and the rest renormalised (uniform over the rest where it had all)."""
    out = alpha.clone()
    out[:, expert] = 0
    total = out.sum(-1, keepdim=True)
    rest = torch.ones_like(out)
    rest[:, expert] = 0
    return torch.where(total > 0, out / total.clamp_min(1e-30), rest / rest.sum(-1, keepdim=True))


def perturb(kind: str, alpha: Tensor, logits: Tensor, strength: float, seed: int) -> Tensor:
    """One of `PERTURBATIONS` at a strength (noise sd, misrouted fraction or flattening amount)."""
    if kind == "logit noise":
        return noisy_logits(logits, strength, seed)
    if kind.startswith("misrouted"):
        return misroute(alpha, strength, seed, adjacent="adjacent" in kind)
    if kind == "flattened":
        return flatten(alpha, strength)
    raise ValueError(f"unknown routing perturbation {kind!r}; allowed: {', '.join(PERTURBATIONS)}")
