import pandas as pd
import torch

from redlib.core.store import Store
from redlib.experiments import toy_experiments
from redlib.configs.toy_experiments import ToyConfig
from redlib.models.combiners import OutputMixture, average_parameters
from redlib.models.experts import LinearExpert, MLPExpert


def test_grid_and_domains():
    g = toy_experiments.grid()
    assert g.x.shape == (10_000, 2) and g.y.shape == (10_000, 1)
    dom = toy_experiments.domain_of(g.a, g.b)
    assert [(dom == i).sum().item() for i in range(5)] == [400] * 5
    assert (dom == -1).sum().item() == 8_000
    assert toy_experiments.domain_of(torch.tensor([20, 21, 100]), torch.tensor([1, 40, 81])).tolist() == [0, 1, 4]


def test_correctness_is_rounding_to_the_sum():
    d = toy_experiments.ToyData(torch.tensor([10, 10, 10]), torch.tensor([20, 20, 20]))
    y_hat = torch.tensor([[30.4 / 200], [29.6 / 200], [30.6 / 200]])
    assert toy_experiments.correct(y_hat, d).tolist() == [True, True, False]



def test_exact_base_is_perfect_everywhere():
    ev = toy_experiments.evaluate({"base": toy_experiments.exact_base()})
    assert (ev["accuracy"] == 1.0).all() and ev["n"].sum() == 10_000


def test_averaging_identical_experts_changes_nothing():
    torch.manual_seed(0)
    m = MLPExpert(hidden=8)
    x = torch.rand(50, 2)
    assert torch.allclose(average_parameters([m, m, m])(x), m(x), atol=1e-6)
    assert torch.allclose(OutputMixture([m, m])(x), m(x), atol=1e-6)


def test_trained_linear_expert_beats_chance(tmp_path):
    """A short run on D1 fits its domain far better than the untrained expert and heads for w = [0.5, 0.5]."""
    cfg = ToyConfig.from_params(profile="smoke", max_epochs=300, patience=300)
    g = toy_experiments.grid()
    d1 = g.subset(torch.nonzero(toy_experiments.domain_of(g.a, g.b) == 0).squeeze(1))
    torch.manual_seed(0)
    untrained = LinearExpert()
    before = toy_experiments.correct(untrained(d1.x), d1).float().mean().item()
    model = LinearExpert()
    model.load_state_dict(untrained.state_dict())
    meta = toy_experiments.train_on(model, d1, cfg, 0, Store(tmp_path), "linear", "test")
    assert [p.name for p in tmp_path.iterdir()] == [cfg.KEY]  # its stages, under the page's key
    after = toy_experiments.correct(model(d1.x), d1).float().mean().item()
    assert meta["cached"] is False and after > 0.9 > before
    assert torch.allclose(model.weight, torch.tensor([[0.5, 0.5]]), atol=0.05)


def test_worst_and_best_domain_ignore_off_domain_points():
    ev = pd.DataFrame({"seed": [0, 0, 0], "model": ["m"] * 3, "domain": ["D1 [1,20]", "D2 [21,40]", "off-domain"],
                       "accuracy": [0.5, 0.9, 0.0]})
    assert toy_experiments.worst_domain(ev, ["m"]).tolist() == [0.5]
    assert toy_experiments.best_domain(ev, ["m"]).tolist() == [0.9]


def test_own_domain_pairs_each_expert_with_its_domain():
    ev = pd.DataFrame({"seed": [0] * 4, "model": ["r1", "r1", "r2", "r2"],
                       "domain": ["D1 [1,20]", "D2 [21,40]", "D2 [21,40]", "off-domain"], "accuracy": [0.9, 0.1, 0.8, 0.0]})
    assert toy_experiments.own_domain(ev, ["r1", "r2"]).tolist() == [0.8]


def test_parallel_workers_give_the_serial_tables_and_record_every_stage(tmp_path, monkeypatch):

    cfg = ToyConfig.from_params(profile="smoke", max_epochs=5, patience=5)
    serial_store, parallel_store = Store(tmp_path / "serial"), Store(tmp_path / "parallel")
    monkeypatch.setenv("REDLIB_WORKERS", "1")
    serial = toy_experiments.run(cfg, serial_store)
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    parallel = toy_experiments.run(cfg, parallel_store)
    assert serial.keys() == parallel.keys()
    for name in serial:
        pd.testing.assert_frame_equal(serial[name], parallel[name])
    # the workers' stages were computed into the page's cache and recorded in its store
    assert parallel_store.misses == serial_store.misses > 0 and parallel_store.hits == 0
    assert set(parallel_store.seconds) == set(serial_store.seconds)
    again = Store(tmp_path / "parallel")
    toy_experiments.run(cfg, again)
    assert again.misses == 0 and again.hits == serial_store.misses
