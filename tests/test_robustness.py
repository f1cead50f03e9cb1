"""Routing perturbations, plug-in modularity, the ablations and cost, on the tiny synthetic pipeline task."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from test_pipeline import K, synthetic, tiny_config

from redlib.book.costs import timed_runs
from redlib.configs.robustness_and_cost import RobustnessConfig
from redlib.core.config import ParameterError
from redlib.core.store import Store, state_equal
from redlib.experiments import robustness_and_cost as rb
from redlib.experiments import robustness_and_cost_report as rr
from redlib.red import cost, methods, perturbation
from redlib.red.pipeline import retrain_residuals, router_over, run_red


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    cfg = tiny_config(epochs=30)
    store = Store(tmp_path_factory.mktemp("cache"))
    data, enc = synthetic()
    return rb.Loaded(rb.MN, cfg, run_red(cfg, data, enc, store, seed=0), enc), store


def test_perturbations_keep_weights_on_the_simplex_and_are_the_identity_at_zero():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(50, 4, generator=g) * 3
    a = z.softmax(-1)
    assert torch.allclose(perturbation.noisy_logits(z, 0.0, 1), a)
    assert torch.equal(perturbation.noisy_logits(z, 1.0, 1), perturbation.noisy_logits(z, 1.0, 1))
    assert not torch.equal(perturbation.noisy_logits(z, 1.0, 1), perturbation.noisy_logits(z, 1.0, 2))
    assert torch.equal(perturbation.misroute(a, 0.0, 3), a) and torch.equal(perturbation.flatten(a, 0.0), a)
    assert torch.allclose(perturbation.flatten(a, 1.0), torch.full_like(a, 0.25))
    for adjacent in (False, True):
        m = perturbation.misroute(a, 1.0, 3, adjacent)
        assert torch.allclose(m.sum(-1), torch.ones(50)) and (m.argmax(-1) != a.argmax(-1)).all()
        if adjacent:
            assert ((m.argmax(-1) - a.argmax(-1)).abs() == 1).all()
    half = perturbation.misroute(a, 0.5, 3)
    assert (half.argmax(-1) != a.argmax(-1)).sum() == 25
    r = perturbation.remove(torch.tensor([[0.5, 0.25, 0.25, 0.0], [1.0, 0.0, 0.0, 0.0]]), 0)
    assert torch.allclose(r, torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.0, 1 / 3, 1 / 3, 1 / 3]]))
    with pytest.raises(ValueError, match="unknown routing perturbation 'dropout'; allowed: logit noise"):
        perturbation.perturb("dropout", a, z, 0.1, 0)


def test_sweep_starts_from_the_clean_methods_and_flattening_the_moe_gives_uniform_averaging(loaded):
    ld, _ = loaded
    sw = rb.sweep(ld, {"flattened": [0.0, 1.0], "logit noise": [0.0, 2.0]})
    acc = sw.set_index(["perturbation", "strength", "method"])["accuracy"]
    clean = rb._accuracy(ld.red, methods.predict(ld.red))
    for m in rb.ROUTED:
        assert acc[("none", 0.0, m)] == clean[m] == acc[("flattened", 0.0, m)] == acc[("logit noise", 0.0, m)]
    assert acc[("flattened", 1.0, "softmax MoE")] == clean["uniform averaging"]
    drop = rr.mean_drop(sw).set_index("method")["lost"]
    assert set(drop.index) == set(rb.ROUTED) | set(rb.REFERENCE) and drop["global head"] == 0


def test_modularity_replaces_removes_and_adds_experts_without_touching_the_rest(loaded):
    ld, store = loaded
    before = [p.clone() for p in ld.red.head.parameters()]
    mod = rb.modularity(ld, store, replacement_seed=1000)
    assert all(torch.equal(a, b) for a, b in zip(before, ld.red.head.parameters()))
    assert len(mod["removed"]) == len(mod["replaced"]) == K * K * 2  # expert x domain x (RED, MoE)
    red = mod["removed"][mod["removed"]["method"] == "RED"]
    own = red[red["domain"] == red["expert"]]
    assert (own["change"] <= 0).all() and own["change"].min() < 0  # the domain that lost its expert suffers
    added = mod["added"]
    assert added["identical_to_all_at_once"].all()
    systems = added.pivot_table(index="domain", columns="system", values="accuracy")
    assert (systems.filter(like="later").iloc[:, 0] == systems["all experts at once"]).all()
    # a reseeded expert is another expert, cached under its own key; the run's own experts are untouched
    other, _ = retrain_residuals(ld.cfg, ld.red, ld.encoder, store, seed=1000)
    assert not state_equal(other[0], ld.red.residuals[0])
    again, _ = retrain_residuals(ld.cfg, ld.red, ld.encoder, store)
    assert all(state_equal(a, b) for a, b in zip(again, ld.red.residuals))
    early, epochs = router_over(ld.cfg, ld.red, ld.encoder, store, K - 1)
    assert early(ld.red.features["test"]).shape == (len(ld.red.data.labels["test"]), K - 1)
    assert [e["stage"] for e in epochs] == [f"router over {K - 1} domains"]
    # every stage the page trains itself is on its record: K replacement residuals and experts, the early
    # router, the last residual (stage 2's entry, loaded) and the full router, each with its rate and stop
    ep = mod["epochs"]
    assert list(ep.groupby("study", sort=False).size().items()) == [("replacement", 2 * K), ("added later", K + 2)]
    assert (ep["lr"] == ld.cfg.head_lr).all() and ep["stopped by patience"].notna().all()
    assert {"task", "seed", "stage", "epochs run", "max epochs", "patience"} <= set(ep.columns)
    with pytest.raises(ValueError, match=r"domains must be in \[1, 3\], got 0"):
        router_over(ld.cfg, ld.red, ld.encoder, store, 0)


def test_rank_ablation_reloads_the_runs_own_rank_and_trains_the_others(loaded):
    ld, store = loaded
    out = rb.rank_ablation(ld, store, [2, 4])
    rows = out["rank"].set_index("rank divisor")
    assert list(out["epochs"].groupby("study", sort=False).size().items()) == [("rank d/2", K), ("rank d/4", K)]
    clean = rb._accuracy(ld.red, methods.predict(ld.red, names=["RED"]))["RED"]
    assert rows.loc[4, "accuracy"] == clean and list(rows["rank"]) == [8, 4]
    assert rows.loc[2, "residual parameters"] > rows.loc[4, "residual parameters"]
    nr = rb.no_residual(ld).set_index("method")["accuracy"]
    assert set(nr.index) == {"RED", "softmax MoE", methods.NO_RESIDUAL} and 0 <= nr[methods.NO_RESIDUAL] <= 1


def test_the_no_residual_ablation_mixes_each_residual_experts_answer():
    run = type("R", (), {})()
    h = torch.randn(5, 16)
    head = torch.nn.Linear(16, 6)
    res = [torch.nn.Linear(16, 16) for _ in range(K)]
    run.residuals, run.head, run.router = res, head, lambda x: torch.full((len(x), K), 1 / K)
    logits, _ = methods.residual_gating(run)(h)
    expected = torch.stack([head(h + r(h)).softmax(-1) for r in res]).mean(0)
    assert torch.allclose(logits.exp().float(), expected, atol=1e-6)


@pytest.mark.parametrize("params, message", [
    ({"noise_levels": "0,x"}, "'noise_levels' of robustness_and_cost must be a list of float, got '0,x'"),
    ({"noise_levels": [0, "x"]}, "'noise_levels' of robustness_and_cost must be a list of float"),
    ({"noise_levels": []}, r"'noise_levels' takes a non-empty list of numbers in \[0, 1000\]"),
    ({"misroute_fractions": [0, 1.5]}, r"'misroute_fractions' takes a non-empty list of numbers in \[0, 1\]"),
    ({"rank_divisors": [2, 8]}, "must include 4"),
    ({"stable_tol": 0.0}, r"'stable_tol' must be in \(0, 1\)"),
    ({"n_seeds": 0}, "'n_seeds' must be >= 1"),
])
def test_bad_parameters_are_one_line_errors(params, message):
    with pytest.raises(ParameterError, match=message):
        RobustnessConfig.from_params(profile="smoke", **params)


def test_missing_folders_fail_before_any_run(tmp_path):
    with pytest.raises(ParameterError, match="does not exist"):
        RobustnessConfig.from_params(profile="smoke", backbone=str(tmp_path / "none")).preflight()
    with pytest.raises(ParameterError):
        RobustnessConfig.from_params(profile="smoke", mnist_data_dir=str(tmp_path / "none")).preflight()


def test_the_sources_are_the_pages_own_configs():
    cfg = RobustnessConfig.from_params(profile="smoke")
    src = cfg.sources()
    assert src["t1"].asdict() == type(src["t1"]).from_params(profile="smoke", n_seeds=1).asdict()
    assert src["mn"].head_lr == 0.001 and src["t2"].split == "iid"


def test_method_cost_counts_every_module_each_method_trains():
    from redlib.configs.task1_addition import Task1Config
    from redlib.models.backbone import Backbone

    bb = Backbone("embedded", 2)
    cfg = Task1Config.from_params(profile="smoke")
    mc = cost.method_cost(bb, cfg, 5, 99, 10).set_index(["backbone", "method"])
    d = bb.dim
    name = mc.index[0][0]
    head = d * 99 + 99
    residual = 2 * d * (d // 4) + d + d // 4
    router = d * 256 + 256 + 256 * 5 + 5
    assert mc.loc[(name, "RED"), "parameters"] == head + 5 * residual + router
    assert mc.loc[(name, "global head"), "parameters"] == head
    assert mc.loc[(name, "global head"), "MACs per query"] == d * 99
    assert len(mc) == 10 and (mc["share of backbone parameters"] > 0).all()


def test_costs_are_read_from_the_pages_own_runs_and_count_their_runs(tmp_path):
    """eff.train_time reads what the pages' runs recorded (their stages' training seconds), never the bench; a run
    from before stages kept their cost is left out rather than guessed."""
    from redlib.book.costs import published_costs
    from redlib.book.results import digests

    def page(name: str, params: dict, by_kind: dict, unknown: int = 0) -> None:
        d = tmp_path / "full" / name
        d.mkdir(parents=True)
        prov = {"parameters": params, "git_commit": "abc1234def", "started_at": "2026-11-23T00:00:00+00:00",
                "stages": {"train_seconds_by_kind": by_kind, "stages_without_recorded_cost": unknown}}
        (d / "claims.json").write_text(json.dumps({"claims": {}, "provenance": prov, "sha256": digests(d, {})}))

    page("task1_addition", {"n_seeds": 3, "splits_reported": "iid,pairs", "digits_variant_on": "pairs",
                            "extension_seeds": 1}, {"t1/stage1": 600.0, "t1/expert": 300.0, "t1/router": 120.0})
    page("mnist_label5", {"n_seeds": 5}, {"mn/stage1": 30.0})
    page("task2_mixed", {"n_seeds": 3}, {"t2/stage1": 10.0}, unknown=4)  # older run: left out
    times = published_costs(["task1_addition", "mnist_label5", "task2_mixed"], "full", tmp_path)
    assert dict(times.groupby("page")["runs"].first()) == {"mnist_label5": 5, "task1_addition": 5}
    assert timed_runs({"n_seeds": 3, "splits_reported": "iid,pairs", "digits_variant_on": "pairs"}) == 9
    beside = {"n_seeds": 3, "splits_reported": "iid,pairs", "digits_variant_on": "pairs", "extension_seeds": 1}
    assert timed_runs({**beside, "stage1_paper_beside": True, "head_lr_grid": "0.0001,0.001"}) == 8  # 3 more
    assert timed_runs({**beside, "stage1_paper_beside": True, "head_lr_grid": "none"}) == 5  # not run then
    one = {**beside, "stage1_paper_beside": True, "head_lr_grid": "0.0001,0.001", "stage1_beside_seeds": 1}
    assert timed_runs(one) == 6  # today's protocol: the stage-1 extension on the first seed only
    assert timed_runs({**one, "split_seeds": 3}) == 8  # and the other split on the protocol's three seeds
    assert timed_runs({**one, "mix_variant": "1:0.5,2:0.5", "step_mix": "1:0.8,2:0.2"}) == 7  # Task 2's 50/50
    today = {"n_seeds": 3, "extensions": ["pairs", "digits:pairs"], "extension_seeds": 1}
    assert timed_runs(today) == timed_runs(beside) == 5  # today's extensions count as the switches did
    assert timed_runs({**today, "extensions": ["pairs"]}) == timed_runs({**beside, "digits_variant_on": "none"}) == 4
    assert timed_runs({**today, "split_seeds": 3}) == 7
    c = pd.DataFrame([{"backbone": "embedded", "RED share of backbone": 0.02, "router share of compute": 0.001,
                       "MoE / RED expert parameters": 2.0},
                      {"backbone": "Qwen3-0.6B shape", "RED share of backbone": 0.005, "router share of compute": 1e-4,
                       "MoE / RED expert parameters": 0.5}])
    claims = rr.cost_claims(c, times, pd.Series({"task1_addition": 2.0, "mnist_label5": 1.0}), "embedded")
    assert claims["eff.train_time"]["value"]["total_hours"] == pytest.approx(1020 / 5 / 3600)
    assert claims["eff.train_time"]["value"]["experts_minutes"] == pytest.approx(300 / 5 / 60)
    assert claims["eff.peak_memory"]["per_seed"] == [2.0] and claims["eff.peak_memory"]["bound"] == [0.0, 6.5]
    assert claims["eff.red_vs_moe_params"]["per_seed"] == [False]
    assert np.isclose(claims["eff.params"]["value"], 0.005)


def test_the_plug_in_claim_fails_when_a_removal_moves_another_domain():
    rows = lambda change: pd.DataFrame([  # noqa: E731
        {"task": "Task 1", "seed": 0, "method": m, "expert": "R1", "domain": d, "change": c, "before": 0.9,
         "accuracy": 0.9 + c}
        for m in ("RED", "softmax MoE") for d, c in (("R1 [2, 20]", -0.9), ("R2 [21, 40]", change))])
    added = pd.DataFrame([{"task": "Task 1", "seed": 0, "system": s, "domain": "R1", "accuracy": 0.9,
                           "identical_to_all_at_once": True}
                          for s in ("first 4 experts, router over them", "expert 5 added later", "all experts at once")])
    ok = rr.plug_in({"removed": rows(0.01), "replaced": rows(0.0), "added": added}, "Task 1", 0.02)
    bad = rr.plug_in({"removed": rows(-0.05), "replaced": rows(0.0), "added": added}, "Task 1", 0.02)
    assert ok["per_seed"] == [True] and bad["per_seed"] == [False]
    assert bad["value"]["removal: largest change on other domains"] == pytest.approx(0.05)
    assert ok["compared"] == pytest.approx([0.9, 0.91, 0.9, 0.9])  # what the ledger's ceiling rule reads


def test_replace_keeps_the_other_experts_objects(loaded):
    ld, _ = loaded
    swapped = rb._swap(ld.red.residuals, ["a", "b", "c"], 1)
    assert swapped[0] is ld.red.residuals[0] and swapped[1] == "b" and swapped[2] is ld.red.residuals[2]
    assert replace(ld.red, residuals=swapped).experts is ld.red.experts


def test_cold_estimates_bracket_a_page_by_its_recorded_stage_seconds(tmp_path):
    """Stage 1 serial in the page's process, the rest over its workers: the range is (sum / (workers + 1),
    stage 1 + rest / workers); a cold timing is put beside it only when it ran today's profile and code."""
    from redlib.bench import report
    from redlib.book.costs import cold_estimates
    from redlib.book.results import digests

    d = tmp_path / "full" / "mnist_label5"
    d.mkdir(parents=True)
    prov = {"parameters": {"n_seeds": 5}, "git_commit": "abc1234def", "started_at": "2026-11-23T00:00:00+00:00",
            "run_options": {"workers": 2},
            "stages": {"train_seconds_by_kind": {"mn/stage1": 600.0, "mn/expert": 1200.0},
                       "stages_without_recorded_cost": 0}}
    pd.DataFrame({"stage": ["stage 1", "expert D1", "router"], "epochs run": [40, 1250, 90]}).to_csv(d / "epochs.csv")
    (d / "claims.json").write_text(json.dumps({"claims": {}, "provenance": prov, "sha256": digests(d, {})}))
    est = cold_estimates(["mnist_label5", "task2_mixed"], "full", tmp_path)  # task2 has no run: left out
    assert list(est["page"]) == ["mnist_label5"]
    row = est.iloc[0]
    assert row["stage 1 min"] == 10 and row["other stages, worker min"] == 20
    assert row["low: all busy, min"] == pytest.approx(10) and row["high: stage 1 apart, min"] == pytest.approx(20)
    assert row["longest stage"] == "expert D1: 1,250 epochs"  # what the rate costs: the stage patience stopped last
    assert report.longest("mnist_label5", est) == "; mnist_label5's longest stage, expert D1: 1,250 epochs"
    assert report.longest("task2_mixed", est) == "" and report.longest("mnist_label5", None) == ""
    assert np.isnan(report.with_cold_times(None, est)["cold, timed, min"].iloc[0])  # no bench: nothing beside


def test_a_step_mix_written_two_ways_is_one_run():

    base = {"n_seeds": 3, "extension_seeds": 1, "splits_reported": "iid", "digits_variant_on": "none"}
    same = timed_runs({**base, "step_mix": "1:0.5,2:0.5", "mix_variant": "1:0.50,2:0.50"})
    other = timed_runs({**base, "step_mix": "1:0.8,2:0.2", "mix_variant": "1:0.5,2:0.5"})
    assert (same, other) == (3, 4)
    today = {"n_seeds": 3, "extension_seeds": 1, "extensions": ["mix:50/50"]}  # and as `extensions` writes it
    assert timed_runs({**today, "step_mix": "1:0.50,2:0.50"}) == 3
    assert timed_runs({**today, "step_mix": "1:0.8,2:0.2"}) == 4


def test_the_sources_trained_ahead_are_the_runs_the_page_loads(monkeypatch, tmp_path):
    """`redlib sources robustness_and_cost` calls the page's own `load` for every task and seed, with one store, so
    the page started from that cache (bench --warm-from) loads every source stage and trains only its own."""
    calls = []
    monkeypatch.setattr(rb.ranges, "backbone", lambda cfg: "bb")
    monkeypatch.setattr(rb, "load", lambda cfg, task, seed, store, bb: calls.append((task, seed, store, bb)))
    cfg = RobustnessConfig.from_params(profile="full", seed=4)
    store = Store(tmp_path)
    assert rb.train_sources(cfg, store, progress=False) == 0
    assert sorted((t, s) for t, s, _, _ in calls) == sorted((t, s) for t in rb.TASKS for s in (4, 5, 6))
    assert all(st is store and bb == "bb" for _, _, st, bb in calls)


def test_the_pages_own_stages_are_counted_with_their_rate_and_those_that_ended_at_a_cap():
    ep = pd.DataFrame({"task": ["Task 1", "Task 1", "MNIST"], "lr": [1e-4, 1e-4, 1e-3], "patience": [10, 10, 10],
                       "stopped by patience": [True, False, True], "epochs run": [20, 150, 30],
                       "max epochs": [150, 150, 300]})
    assert rr.own_stages_words(ep) == ("3 stages (Task 1 at lr 1e\u20114, patience 10, MNIST at lr 1e\u20113, patience "
                                       "10); 1 ended at their cap instead of by patience")
    assert rr.own_stages_words(None) == "none recorded"


def test_misrouting_is_said_against_the_global_head_on_both_tasks():
    kind = "misrouted (random expert)"
    acc = {("Task 1", "RED"): 0.99, ("Task 1", "global head"): 1.0, ("Task 1", "softmax MoE"): 0.0,
           ("MNIST", "RED"): 0.9, ("MNIST", "global head"): 0.8, ("MNIST", "softmax MoE"): 0.1}
    at_end = pd.Series({(t, kind, m): a for (t, m), a in acc.items()})
    words = rr.misrouting_words(at_end)
    assert "0.010 below the global head, which does not route, on Task 1 (0.990 against 1.000" in words
    assert "0.100 above it on MNIST (0.900 against 0.800; the softmax MoE 0.100)" in words


def test_a_change_that_did_not_happen_reads_as_none_never_at_most_zero():
    from redlib.experiments.robustness_and_cost_report import moves

    assert moves(0.0) == "not at all" and moves(0.0125) == "by at most 0.013" and moves(1e-5) == "by at most < 5e-4"
