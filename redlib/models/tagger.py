"""The step decomposer's model: a bidirectional GRU tagger over a backbone's frozen token embeddings.

It reads the raw expression's tokens and tags each one: `O`, or, on the first token of a number, the number's
place in the program (`first`: the left operand of step 1; `+s` / `-s`: the right operand of step s and the
step's operator). It predicts structure only; the numbers' values are read from the text at the tagged places.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

MAX_STEPS = 4
TAGS = ["O", "first", *[f"{op}{s}" for s in range(1, MAX_STEPS + 1) for op in "+-"]]  # 10 tags


def tag_of(slot: int, op: str | None) -> int:
    """Tag index of a number in program slot `slot` (0: step 1's left operand; s: step s's right operand, with op)."""
    return 1 if slot == 0 else TAGS.index(f"{op}{slot}")


class Tagger(nn.Module):
    """(B, T) token ids and mask -> (B, T, len(TAGS)) tag logits; the token embeddings stay frozen (not saved)."""

    def __init__(self, embeddings: Tensor, hidden: int = 128, layers: int = 2):
        super().__init__()
        self.register_buffer("emb", embeddings.detach().clone(), persistent=False)  # (V, e), the backbone's
        self.rnn = nn.GRU(embeddings.shape[1], hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, len(TAGS))

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        x = F.embedding(ids, self.emb) * mask[..., None]  # (B, T, e)
        states, _ = self.rnn(x)  # (B, T, 2 * hidden)
        return self.out(states)  # (B, T, n_tags)


def tagging_loss(model: Tagger, batch) -> Tensor:
    """Cross-entropy over the real (unpadded) tokens; batch = (ids, mask, tags), each (B, T)."""
    ids, mask, tags = batch
    logits = model(ids, mask)
    keep = mask.bool()
    return F.cross_entropy(logits[keep], tags[keep])


@torch.no_grad()
def predict_tags(model: Tagger, ids: Tensor, mask: Tensor, batch: int = 512) -> Tensor:
    """Most likely tag of every token, (N, T); padding gets `O`."""
    model.eval()
    out = [model(ids[s:s + batch], mask[s:s + batch]).argmax(-1) for s in range(0, len(ids), batch)]
    return torch.cat(out) * mask
