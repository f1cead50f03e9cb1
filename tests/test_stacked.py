"""Stacked small stages (`redlib/core/stacked.py`) are the same mathematics as separate fits, to fp32 round-off."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn import functional as F

from redlib.core.stacked import fit_stacked, stack
from redlib.core.train import TrainConfig, fit
from redlib.models.experts import HeadExpert, LowRankLogits, LowRankResidual

D, C = 32, 7
HEAD = torch.nn.Linear(D, C).requires_grad_(False)
# each kind of stacked stage: a fresh expert, and its answer logits(m, h) (the loss is their cross-entropy)
KINDS = {
    "linear expert": (lambda: HeadExpert(D, C, 0), lambda m, h: m(h)),
    "mlp expert": (lambda: HeadExpert(D, C, 16), lambda m, h: m(h)),
    "red residual": (lambda: LowRankResidual(D, 8), lambda m, h: HEAD(h + m(h))),
    "code expert": (lambda: LowRankLogits(D, 8, C), lambda m, h: HEAD(h) + 0.5 * m(h)),
}
# The largest relative parameter difference measured against separate fits on a 2-core Intel Xeon (MKL) was 9.8e-9
# (linear experts; bit-identical for the other kinds); the bound leaves room for other kernels (oneDNN on AMD).
BOUND = 1e-5


def _setup(make, sizes=(70, 45, 101, 16), seed=0):
    gen = torch.Generator().manual_seed(seed)
    train = [(torch.randn(n, D, generator=gen), torch.randint(0, C, (n,), generator=gen)) for n in sizes]
    val = [(torch.randn(n // 3 + 2, D, generator=gen), torch.randint(0, C, (n // 3 + 2,), generator=gen)) for n in sizes]
    models = []
    for k in range(len(sizes)):
        torch.manual_seed(k)
        models.append(make())
    return train, val, models


def _separate(models, logits, train, val, cfgs):
    loss = lambda m, b: F.cross_entropy(logits(m, b[0]), b[1])  # noqa: E731
    return [fit(m, loss, tr, va, c) for m, tr, va, c in zip(models, train, val, cfgs)]


def _gap(a, b) -> float:
    with torch.no_grad():
        return max(float((p - q).abs().max() / q.abs().max().clamp_min(1e-12))
                   for m1, m2 in zip(a, b) for p, q in zip(m1.parameters(), m2.parameters()))


@pytest.mark.parametrize("kind", KINDS)
def test_stacked_fits_agree_with_separate_fits(kind):
    """Experts of unequal data sizes (short last batches and groups), each with its own order: after the same epochs
    every parameter, every epoch's losses and the kept epoch agree with separate fits within fp32 round-off."""
    make, logits = KINDS[kind]
    train, val, models = _setup(make)
    separate = copy.deepcopy(models)
    cfgs = [TrainConfig(lr=1e-2, max_epochs=8, patience=100, seed=3) for _ in models]
    want = _separate(separate, logits, train, val, cfgs)
    got = fit_stacked(models, logits, train, val, cfgs)
    assert _gap(models, separate) < BOUND
    for g, w in zip(got, want):
        assert g.best_epoch == w.best_epoch and len(g.history) == len(w.history)
        for hg, hw in zip(g.history, w.history):
            assert hg["val_loss"] == pytest.approx(hw["val_loss"], rel=1e-5)
            assert hg["train_loss"] == pytest.approx(hw["train_loss"], rel=1e-5)


def test_each_expert_stops_on_its_own_and_keeps_its_best_state():
    """Patience per expert: the experts stop at different epochs, as their separate fits do, each restored to its
    best epoch; an expert with a cap of 0 epochs is left as it was."""
    make, logits = KINDS["mlp expert"]
    train, val, models = _setup(make, sizes=(150, 200, 121, 33, 210))
    untouched = copy.deepcopy(models[4])
    separate = copy.deepcopy(models)
    cfgs = [TrainConfig(lr=3e-2, max_epochs=40, patience=2, seed=1) for _ in models[:4]]
    cfgs.append(TrainConfig(lr=3e-2, max_epochs=0, patience=2, seed=1))
    want = _separate(separate[:4], logits, train[:4], val[:4], cfgs[:4])
    got = fit_stacked(models, logits, train, val, cfgs)
    assert len({len(r.history) for r in want}) > 1  # the test means something: they stop at different epochs
    assert [(r.best_epoch, len(r.history), r.stopped_early) for r in got[:4]] == \
        [(r.best_epoch, len(r.history), r.stopped_early) for r in want]
    assert _gap(models[:4], separate[:4]) < BOUND
    assert _gap([models[4]], [untouched]) == 0.0 and got[4].history == []


def test_a_stack_rejects_what_it_cannot_train():
    """Experts of other shapes, another shared knob, a parameter outside a Linear: a clear error, before training."""
    make, logits = KINDS["linear expert"]
    train, val, models = _setup(make, sizes=(20, 20))
    cfg = TrainConfig(max_epochs=1)
    with pytest.raises(ValueError, match="differ in structure or shapes"):
        stack([HeadExpert(D, C, 0), HeadExpert(D, C + 1, 0)])
    with pytest.raises(ValueError, match="must share 'lr'"):
        fit_stacked(models, logits, train, val, [cfg, TrainConfig(lr=1e-3, max_epochs=1)])
    with pytest.raises(ValueError, match="must belong to an nn.Linear"):
        stack([torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)])
    with pytest.raises(ValueError, match="one train set"):
        fit_stacked(models, logits, train[:1], val, [cfg, cfg])


def test_the_convergence_rule_doubles_each_experts_cap_as_its_separate_fit_does():
    """With the cap-doubling rule, each expert trains on past its cap while it improves, and ends at the epoch and cap
    its separate fit under the same rule ends at (and at least one needed a doubling)."""
    make, logits = KINDS["linear expert"]
    train, val, models = _setup(make, sizes=(150, 200, 121, 33))
    separate = copy.deepcopy(models)
    cfgs = [TrainConfig(lr=3e-3, max_epochs=3, patience=2, seed=1, double_cap=True) for _ in models]
    want = _separate(separate, logits, train, val, cfgs)
    got = fit_stacked(models, logits, train, val, cfgs)
    assert any(r.cap > 3 for r in want) and all(r.stopped_early for r in want)
    assert [(r.best_epoch, len(r.history), r.cap) for r in got] == [(r.best_epoch, len(r.history), r.cap) for r in want]
    assert _gap(models, separate) < BOUND
