"""Expert modules: linear, MLP, and residual (base + scaled correction)."""

from __future__ import annotations

from torch import Tensor, nn


class LinearExpert(nn.Linear):
    """y_hat = w . x + b."""

    def __init__(self, d_in: int = 2, d_out: int = 1):
        super().__init__(d_in, d_out)


class MLPExpert(nn.Sequential):
    """d_in -> hidden -> hidden -> d_out with ReLU (the paper's toy 2-64-64-1)."""

    def __init__(self, d_in: int = 2, hidden: int = 64, d_out: int = 1):
        super().__init__(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, d_out))


class ScaledExpert(nn.Module):
    """r(x) = scale * net(x): a residual correction of bounded influence (the toy's 0.1 * MLP)."""

    def __init__(self, net: nn.Module, scale: float = 0.1):
        super().__init__()
        self.net, self.scale = net, scale

    def forward(self, x: Tensor) -> Tensor:
        return self.scale * self.net(x)


class BasePlusResidual(nn.Module):
    """f(x) = base(x) + residual(x); the base is frozen so training touches only the residual."""

    def __init__(self, base: nn.Module, residual: nn.Module):
        super().__init__()
        self.base, self.residual = base, residual
        self.base.requires_grad_(False)

    def forward(self, x: Tensor) -> Tensor:
        return self.base(x) + self.residual(x)


class HeadExpert(nn.Sequential):
    """A classifier expert on pooled features: d -> hidden -> C (or a linear d -> C when hidden is 0)."""

    def __init__(self, d: int, n_classes: int, hidden: int = 256):
        layers = [nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, n_classes)] if hidden else [nn.Linear(d, n_classes)]
        super().__init__(*layers)


class LowRankResidual(nn.Module):
    """The paper's RED expert: Delta h = V sigma(U h), U: d -> r, V: r -> d; V starts at zero so Delta h starts at 0."""

    def __init__(self, d: int, rank: int):
        super().__init__()
        self.U, self.V = nn.Linear(d, rank), nn.Linear(rank, d)
        nn.init.zeros_(self.V.weight)
        nn.init.zeros_(self.V.bias)

    def forward(self, h: Tensor) -> Tensor:
        return self.V(nn.functional.gelu(self.U(h)))


class LowRankLogits(nn.Module):
    """The released code's expert: logits B A h with no nonlinearity, A: d -> r, B: r -> C."""

    def __init__(self, d: int, rank: int, n_classes: int):
        super().__init__()
        self.A, self.B = nn.Linear(d, rank, bias=False), nn.Linear(rank, n_classes)

    def forward(self, h: Tensor) -> Tensor:
        return self.B(self.A(h))
