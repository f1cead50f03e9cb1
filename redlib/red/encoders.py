"""What stage 1 trains under the global head: an encoder from item ids to features h (N, d).

A task's inputs are *items* (distinct questions, images, feature rows); its samples point at items by id,
so an input that repeats is encoded once. Two encoders:
- `TextEncoder`: a Hugging Face backbone whose bottom blocks are frozen (their states are cached once per
  item, and held in memory only while stage 1 and the features need them) and whose top k blocks train;
  mean-pooled.
- `FixedFeatures`: precomputed features; nothing trains under the head (a probe, or a test's random task).
- `ImageEncoder`: a small CNN over images, trained whole in stage 1 (the MNIST benchmark).
"""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor, nn

from ..core.runtime import device_key
from ..core.store import Store
from ..models.backbone import Backbone
from ..models.cnn import SmallCNN


def digest(values: list[str] | Tensor) -> str:
    """A short content hash of a list of texts or a tensor (what a cache key says about the data)."""
    raw = "\n".join(values).encode() if isinstance(values, list) else values.detach().cpu().contiguous().numpy().tobytes()
    return hashlib.sha256(raw).hexdigest()[:16]


class Encoder(nn.Module):
    """item ids (B,) -> features (B, d); `trainable()` is what stage 1 trains and stores beside the head."""

    dim: int
    n_items: int

    def key(self) -> dict:
        """What identifies this encoder and its items in the stage cache."""
        raise NotImplementedError

    def trainable(self) -> nn.Module:
        """The modules stage 1 trains (an empty ModuleDict when nothing under the head trains)."""
        return nn.ModuleDict()

    def reset(self) -> None:
        """Put the trainable part back to its starting weights (before each independent stage-1 run)."""

    def release(self) -> None:
        """Drop what only training the encoder and computing its features need (called once the features exist)."""

    def length_order(self, ids: Tensor) -> Tensor:
        """Positions in `ids` in the order a batched pass over them runs fastest (shortest texts first; as given
        here, where items have no length)."""
        return torch.arange(len(ids), device=ids.device)

    @torch.no_grad()
    def features(self, batch_size: int = 512) -> Tensor:
        """Features of every item with the encoder as it is now, (n_items, d), in eval mode."""
        self.eval()
        order = self.length_order(torch.arange(self.n_items, device=self.device))
        out = torch.cat([self(order[s:s + batch_size]) for s in range(0, self.n_items, batch_size)])
        return out[order.argsort()]  # back to item order

    @property
    def device(self) -> torch.device:
        """Where the encoder computes."""
        return torch.device("cpu")


class FixedFeatures(Encoder):
    """Precomputed item features x (n_items, d): h = x[ids]."""

    def __init__(self, x: Tensor):
        super().__init__()
        self.register_buffer("x", x, persistent=False)
        self.n_items, self.dim = x.shape

    def key(self) -> dict:
        return {"encoder": "fixed", "x": digest(self.x), **device_key(self.x.device)}

    def forward(self, idx: Tensor) -> Tensor:
        return self.x[idx]  # (B, d)

    @property
    def device(self) -> torch.device:
        return self.x.device


class TextEncoder(Encoder):
    """A backbone over distinct texts: top k blocks trained over frozen-prefix states (kind `prefix`), which are
    loaded (or computed and cached) when first needed and dropped by `release` once the features are made."""

    def __init__(self, bb: Backbone, texts: list[str], store: Store, namespace: str):
        super().__init__()
        self.bb, self.n_items, self.dim = bb, len(texts), bb.dim
        self.tokens = bb.tokenize(texts)
        self._key = {"backbone": bb.identity, "k": bb.k, "texts": digest(texts), **device_key(bb.device)}
        self._store, self._kind = store, f"{namespace}/prefix"
        self._prefix: Tensor | None = None
        self.register_buffer("mask", self.tokens.attention_mask.to(bb.device), persistent=False)  # (n_items, T)
        self.register_buffer("lengths", self.mask.sum(1), persistent=False)  # (n_items,) tokens of each text

    def key(self) -> dict:
        return self._key

    @property
    def prefix_bytes(self) -> int:
        """The size of the frozen-prefix states in memory, (n_items, T, d) floats, without computing them."""
        return self.mask.numel() * self.dim * torch.finfo(torch.float32).bits // 8

    @property
    def prefix(self) -> Tensor:
        """States entering the top blocks, (n_items, T, d): from the cache, computed there once."""
        if self._prefix is None:
            compute = lambda: ({"prefix": self.bb.prefix(self.tokens)}, {})  # noqa: E731
            self._prefix = self._store.tensors(self._kind, self._key, compute)[0]["prefix"].to(self.bb.device)
        return self._prefix

    def release(self) -> None:
        self._prefix = None  # the largest tensor of a run (Task 2: about 0.7 GB); `prefix` loads it again if needed

    def trainable(self) -> nn.Module:
        return self.bb.top_blocks()

    def reset(self) -> None:
        self.bb.reset_top()

    def length_order(self, ids: Tensor) -> Tensor:
        return self.lengths[ids.to(self.lengths.device)].argsort(stable=True).to(ids.device)

    def forward(self, idx: Tensor) -> Tensor:
        # padding beyond the batch's longest text is cut: right-padded and masked, it changes no value, only the cost
        t = int(self.lengths[idx].max())
        return self.bb.forward_top(self.prefix[idx, :t], self.mask[idx, :t])  # (B, t, d) -> top k blocks -> pooled (B, d)

    @property
    def device(self) -> torch.device:
        return self.bb.device


class ImageEncoder(Encoder):
    """The research code's small CNN over item images (n_items, 1, 28, 28), trained whole in stage 1."""

    def __init__(self, images: Tensor, device: torch.device | str = "cpu"):
        super().__init__()
        self.cnn = SmallCNN().to(device)
        self.register_buffer("images", images.to(device), persistent=False)
        self.n_items, self.dim = len(images), SmallCNN.dim
        self._key = {"encoder": "small-cnn", "images": digest(images), **device_key(device)}

    def key(self) -> dict:
        return self._key

    def trainable(self) -> nn.Module:
        return self.cnn

    def reset(self) -> None:
        self.cnn.reset()

    def forward(self, idx: Tensor) -> Tensor:
        return self.cnn(self.images[idx])  # (B, 1, 28, 28) -> (B, 128)

    @property
    def device(self) -> torch.device:
        return self.images.device
