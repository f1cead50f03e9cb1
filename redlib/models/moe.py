"""Dense softmax-gated mixtures of the routing-analysis experiments: a token-level MoE language model and an
MLP MoE classifier for digits.

Every expert sees every input and the outputs are summed with the gate's weights (no top-k), as the paper
describes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

PAD = 0  # the token id every token model reserves for padding; real tokens are 1..V-1


@dataclass(frozen=True)
class LMShape:
    """Sizes of a token model: vocabulary (with PAD), width, depth, heads, feed-forward width, positions."""

    vocab: int
    d_model: int
    layers: int
    heads: int
    ff: int
    max_len: int = 128
    dropout: float = 0.1
    causal: bool = True


class Embeddings(nn.Module):
    """GPT-2 style input: token embedding plus learned position embedding. (B, T) -> (B, T, d)."""

    def __init__(self, s: LMShape):
        super().__init__()
        self.tok = nn.Embedding(s.vocab, s.d_model, padding_idx=PAD)
        self.pos = nn.Embedding(s.max_len, s.d_model)

    def forward(self, ids: Tensor) -> Tensor:
        return self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))


class TokenExpert(nn.Module):
    """A small Transformer encoder (the paper's expert), causally masked when the shape says so. (B, T, d) -> (B, T, d)."""

    def __init__(self, s: LMShape):
        super().__init__()
        layer = nn.TransformerEncoderLayer(s.d_model, s.heads, s.ff, s.dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, s.layers, enable_nested_tensor=False)
        self.causal = s.causal

    def forward(self, h: Tensor, pad: Tensor) -> Tensor:
        T = h.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=h.device), 1) if self.causal else None
        return self.encoder(h, mask=mask, src_key_padding_mask=pad, is_causal=self.causal)


class ExpertLM(nn.Module):
    """One expert with its own embeddings and LM head: the pretraining phase. ids (B, T) -> logits (B, T, V)."""

    def __init__(self, s: LMShape):
        super().__init__()
        self.embed, self.expert, self.head = Embeddings(s), TokenExpert(s), nn.Linear(s.d_model, s.vocab)

    def forward(self, ids: Tensor) -> tuple[Tensor, None]:
        return self.head(self.expert(self.embed(ids), ids == PAD)), None


class TokenMoE(nn.Module):
    """Embeddings, N experts, a token-level router (two-layer ReLU MLP over each token's embedding) and an LM head.

    ids (B, T) -> logits (B, T, V) and routing weights (B, T, N), each token's weights summing to 1.
    """

    def __init__(self, s: LMShape, n_experts: int):
        super().__init__()
        self.embed = Embeddings(s)
        self.experts = nn.ModuleList(TokenExpert(s) for _ in range(n_experts))
        self.router = nn.Sequential(nn.Linear(s.d_model, s.d_model), nn.ReLU(), nn.Linear(s.d_model, n_experts))
        self.head = nn.Linear(s.d_model, s.vocab)

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        h, pad = self.embed(ids), ids == PAD
        alpha = self.router(h).softmax(-1)  # (B, T, N)
        outs = torch.stack([e(h, pad) for e in self.experts], -1)  # (B, T, d, N)
        return self.head((outs * alpha.unsqueeze(-2)).sum(-1)), alpha


def lm_loss(model: nn.Module, ids: Tensor, entropy_weight: float = 0.0) -> Tensor:
    """Next-token cross-entropy over real tokens; minus entropy_weight times the entropy of the mean routing weights.

    Trailing all-padding columns are cut first (with a causal mask they change nothing for real tokens).
    """
    ids = ids[:, : int((ids != PAD).sum(1).max())]
    logits, alpha = model(ids)
    target = ids[:, 1:].masked_fill(ids[:, 1:] == PAD, -100)
    loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100)
    if entropy_weight and alpha is not None:
        mean = alpha[ids != PAD].mean(0)
        loss = loss + entropy_weight * (mean * mean.clamp_min(1e-9).log()).sum()
    return loss


class MLPClassifier(nn.Sequential):
    """784 -> hidden -> hidden -> classes with ReLU and dropout (the paper's digit expert)."""

    def __init__(self, d_in: int = 784, hidden: int = 128, classes: int = 10, dropout: float = 0.2):
        super().__init__(nn.Linear(d_in, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Dropout(dropout), nn.Linear(hidden, classes))

    def load_body(self, other: "MLPClassifier") -> None:
        """Copy the input and hidden layers of `other` (its output layer is left as it is here)."""
        for i in (0, 3):
            self[i].load_state_dict(other[i].state_dict())


class GatedMoE(nn.Module):
    """N MLP experts and a 784-256-128-N gating network (dropout): x (B, 784) -> logits (B, C), gate weights (B, N)."""

    def __init__(self, experts: list[nn.Module], d_in: int = 784, dropout: float = 0.2):
        super().__init__()
        self.experts = nn.ModuleList(experts)
        self.gate = nn.Sequential(nn.Linear(d_in, 256), nn.ReLU(), nn.Dropout(dropout), nn.Linear(256, 128), nn.ReLU(),
                                  nn.Dropout(dropout), nn.Linear(128, len(experts)))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        g = self.gate(x).softmax(-1)
        return (torch.stack([e(x) for e in self.experts], -1) * g.unsqueeze(1)).sum(-1), g
