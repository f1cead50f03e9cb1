import torch
from torch import nn
from torch.nn import functional as F

from redlib.core.store import state_equal
from redlib.core.train import TrainConfig, evaluate_loss, fit


def mse(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def test_early_stopping_restores_best_state():
    """Validation targets oppose the training targets, so validation loss rises after a while: the best state must win."""
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    model = nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.fill_(-1.0)
        model.bias.zero_()
    cfg = TrainConfig(lr=0.05, weight_decay=0.0, batch_size=16, virtual_batch=16, max_epochs=200, patience=5)
    res = fit(model, mse, (x, 2 * x), (x, -0.5 * x), cfg)
    val = [h["val_loss"] for h in res.history]
    assert res.stopped_early and len(val) < cfg.max_epochs
    assert res.best_epoch == val.index(min(val)) < len(val) - 1
    assert val[-1] > min(val)
    # the model holds the best epoch's weights, not the last epoch's
    assert evaluate_loss(model, mse, (x, -0.5 * x)) == min(val) == res.best_val_loss


def test_virtual_batch_accumulates_like_one_large_batch():
    torch.manual_seed(1)
    x, y = torch.randn(64, 3), torch.randn(64, 1)
    a, b = nn.Linear(3, 1), nn.Linear(3, 1)
    b.load_state_dict(a.state_dict())
    common = dict(lr=0.01, weight_decay=0.0, max_epochs=3, patience=10, seed=4)
    fit(a, mse, (x, y), (x, y), TrainConfig(batch_size=8, virtual_batch=32, **common))
    fit(b, mse, (x, y), (x, y), TrainConfig(batch_size=32, virtual_batch=32, **common))
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)


def test_fit_is_reproducible_and_trains_only_unfrozen_parameters():
    x = torch.randn(100, 2, generator=torch.Generator().manual_seed(0))
    y = x.sum(1, keepdim=True)
    models = []
    for _ in range(2):
        torch.manual_seed(2)
        m = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
        m[0].requires_grad_(False)
        frozen = m[0].weight.clone()
        fit(m, mse, (x, y), (x, y), TrainConfig(lr=1e-2, max_epochs=5, batch_size=10, virtual_batch=20))
        assert torch.equal(m[0].weight, frozen)
        models.append(m)
    assert state_equal(*models)


def _slow_fit(max_epochs: int, double_cap: bool, patience: int = 3):
    """A fit that improves for many epochs at a small rate (validation = train, a linear target)."""
    torch.manual_seed(2)
    x = torch.randn(64, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    model = nn.Linear(3, 1)
    cfg = TrainConfig(lr=0.01, weight_decay=0.0, batch_size=16, virtual_batch=16, max_epochs=max_epochs,
                      patience=patience, seed=1, double_cap=double_cap, min_delta=1e-4)
    return model, fit(model, mse, (x, y), (x, y), cfg)


def test_the_convergence_rule_doubles_the_cap_until_patience_stops_the_fit():
    """A fit still improving at its cap trains on under the doubled cap, and ends exactly as a re-run with the cap
    that the rule reached: same epochs, same kept state (the rule is the re-run, without training twice)."""
    capped_model, capped = _slow_fit(5, double_cap=False)
    assert not capped.stopped_early and len(capped.history) == capped.cap == 5
    model, res = _slow_fit(5, double_cap=True)
    assert res.stopped_early and res.cap in [5 * 2**k for k in range(1, 12)]
    assert res.cap // 2 < len(res.history) <= res.cap  # it needed the last doubling, and patience ended it
    again_model, again = _slow_fit(res.cap, double_cap=False)
    assert again.history == res.history and again.best_epoch == res.best_epoch
    assert state_equal(model, again_model)
    assert res.history[:5] == capped.history  # the first 5 epochs are the capped fit's


def test_a_fit_that_stops_by_patience_before_its_cap_keeps_its_cap():
    model, res = _slow_fit(10_000, double_cap=True)
    assert res.stopped_early and res.cap == 10_000 and len(res.history) < 10_000


def test_bf16_fit_learns_with_fp32_weights_and_rejects_unknown_precision():
    """Under bf16 autocast a small classifier still learns (well above chance), while its weights, their gradients'
    target and AdamW's update stay fp32; an unknown precision is refused before any step."""
    import pytest

    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x[:, 0] + x[:, 1] > 0).long()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def ce(m, batch):
        return F.cross_entropy(m(batch[0]), batch[1])

    cfg = TrainConfig(lr=0.01, weight_decay=0.0, batch_size=32, virtual_batch=32, max_epochs=20, patience=20,
                      precision="bf16")
    res = fit(model, ce, (x, y), (x, y), cfg)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert (model(x).argmax(1) == y).float().mean() > 0.9 and res.best_val_loss < 0.3
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16"):
        fit(model, ce, (x, y), (x, y), TrainConfig(precision="fp16"))
