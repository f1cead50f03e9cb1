"""The MNIST benchmark's encoder: the research code's small CNN."""

from __future__ import annotations

from torch import Tensor, nn


class SmallCNN(nn.Sequential):
    """(B, 1, 28, 28) -> (B, 128): conv 3x3 (32), conv 3x3 (64), 2x2 max-pool, linear 9216 -> 128, ReLU after each."""

    dim = 128

    def __init__(self) -> None:
        super().__init__(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 12 * 12, self.dim), nn.ReLU())

    def reset(self) -> None:
        """Fresh initial weights (drawn from torch's global generator)."""
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                m.reset_parameters()

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x)
