"""The task-agnostic RED pipeline on a tiny synthetic task: random features, three domains, every method."""

import numpy as np
import pytest
import torch

from redlib.book import ledger
from redlib.core import measure
from redlib.core.claims import load_claims
from redlib.core.store import Store
from redlib.models.combiners import ProbMixture
from redlib.red import methods
from redlib.red.encoders import FixedFeatures
from redlib.red.pipeline import STAGE_KINDS, RedConfig, TaskData, retrain_experts, retrain_residuals, run_red

K, C, D = 3, 6, 16  # domains, classes, feature size


def synthetic(seed: int = 0, items: int = 300) -> tuple[TaskData, FixedFeatures]:
    """Items with random features; each domain owns two classes, decided by the sign of one feature."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(items, D, generator=g)
    domain = torch.arange(items) % K
    label = 2 * domain + (x[:, domain.tolist()].diagonal() > 0).long()  # class = 2 * domain + sign bit
    x[torch.arange(items), K + domain] += 3.0  # a feature that names the domain
    perm = torch.randperm(items, generator=g)
    parts = {"train": perm[:200], "val": perm[200:250], "test": perm[250:]}
    data = TaskData("synthetic", parts, {k: label[v] for k, v in parts.items()},
                    {k: domain[v] for k, v in parts.items()}, [f"c{i}" for i in range(C)],
                    [f"D{i + 1}" for i in range(K)], {"seed": seed, "items": items})
    return data, FixedFeatures(x)


def tiny_config(epochs: int = 40) -> RedConfig:
    """The pipeline's config for the synthetic task: small widths, a high learning rate, no early stop."""
    return RedConfig.from_params(profile="smoke", n_seeds=1, max_epochs=epochs, backbone_epochs=epochs, patience=epochs,
                                 lr=0.02, head_lr=0.02, expert_hidden=16, router_hidden=16)


@pytest.fixture(autouse=True)
def serial(monkeypatch):
    """Stages train in this process unless a test asks for workers (REDLIB_WORKERS, the run option)."""
    monkeypatch.setenv("REDLIB_WORKERS", "1")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cfg = tiny_config()
    store = Store(tmp_path_factory.mktemp("cache"))
    data, enc = synthetic()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REDLIB_WORKERS", "1")  # the serial run the worker test compares with
        return run_red(cfg, data, enc, store, seed=0), store


def test_every_registered_method_returns_logits_and_routing(run):
    r, _ = run
    h, d = r.features["test"], r.data.domains["test"]
    assert h.shape == (50, D)
    for name, m in methods.methods(r).items():
        logits, alpha = m(h, d)
        assert logits.shape == (50, C), name
        assert torch.isfinite(logits).all(), name
        if name.startswith("global head"):
            assert alpha is None
        else:
            assert alpha.shape == (50, K) and torch.allclose(alpha.sum(1), torch.ones(50)), name


def test_oracle_routes_by_domain_and_override_is_honoured(run):
    r, _ = run
    preds = methods.predict(r, "test")
    assert (preds["oracle experts"][1].argmax(1) == r.data.domains["test"].numpy()).all()
    # an override tensor replaces the gate; a function transforms it (here: drop expert 0 and renormalise)
    forced = torch.zeros(50, K)
    forced[:, 2] = 1.0
    _, a = methods.methods(r)["RED"](r.features["test"], alpha=forced)
    assert torch.equal(a, forced)

    def drop_first(a):
        a = a.clone()
        a[:, 0] = 0
        return a / a.sum(1, keepdim=True)

    dropped = methods.predict(r, "test", alpha={"softmax MoE": drop_first})
    assert (dropped["softmax MoE"][1][:, 0] == 0).all()
    assert np.array_equal(dropped["RED"][1], preds["RED"][1])  # other methods untouched


def test_trained_pipeline_beats_chance_and_caches_every_stage(run, tmp_path):
    r, store = run
    overall, per_domain = methods.score(r, "test")
    acc = overall.set_index("method")["accuracy"]
    assert acc["oracle experts"] > 2 / C and acc["RED"] > 1 / C  # chance is 1/6
    assert list(per_domain.columns[:2]) == ["method", "domain"] and len(per_domain) == K * (len(methods.METHODS) - 1)
    kinds = {p.parent.name for p in store.root.rglob("*.safetensors")}
    assert kinds <= set(STAGE_KINDS)
    assert {"stage1", "expert", "residual", "code", "router", "gate", "joint", "head_all"} <= kinds
    assert {e["stage"] for e in r.epochs} >= {"stage 1", "router", "moe gate"}
    assert all(1 <= e["epochs run"] <= e["max epochs"] for e in r.epochs)
    # the code experts' MoE is an extra stage only for configs that ask for it (CODE_MOE), and then a method
    assert r.code_gate is None and "softmax MoE (code experts)" not in overall["method"].tolist()
    with pytest.raises(ValueError, match="no stage for softmax MoE"):
        methods.methods(r, ["softmax MoE (code experts)"])


def test_the_moe_gate_learns_from_the_answer_loss_to_route_by_domain(run):
    r, _ = run
    h, d = r.features["test"], r.data.domains["test"]
    _, gate_alpha = methods.methods(r)["softmax MoE"](h, d)
    assert (gate_alpha.argmax(1) == d).float().mean() > 1.5 / K  # chance is 1/3; it never saw a domain label
    _, shared = methods.methods(r)["softmax MoE (RED's router)"](h, d)
    assert torch.allclose(shared, r.router(h))


def test_per_domain_intervals_count_distinct_inputs(run):
    r, _ = run
    _, per_domain = methods.score(r, "test")
    row = per_domain[per_domain["method"] == "RED"].iloc[0]
    assert row["distinct inputs"] == len(set(r.data.ids["test"][r.data.domains["test"] == 0].tolist()))
    assert row["ci95 low"] <= row["accuracy"] <= row["ci95 high"]


def test_each_claim_kind_gets_its_verdict_from_the_ledger():
    claims = load_claims()
    cases = {
        "t1.red.acc": (measure.value([0.97, 0.975]), "holds"),  # value: within 0.05 of 0.9725
        "t1.red.per_range": (measure.per_range([[1.0, 0.98, 0.5, 0.5, 0.5]]), "partly"),  # two ranges of five
        "t1.order": (measure.order([False, False], False), "does not hold"),
        "t1.red.all_ranges_high": (measure.bound([0.7, 0.9], 0.8, 1.0), "partly"),
        "t1.router.acc": (measure.bound([0.99]), "holds"),  # the paper's own bound [0.96, 1.0]
    }
    for cid, (entry, expected) in cases.items():
        assert ledger.verdict(claims[cid], entry) == expected, cid
    table = ledger.page_table({cid: entry for cid, (entry, _) in cases.items()})
    assert table["verdict"].tolist() == [v for _, v in cases.values()]



def test_mixtures_in_log_space_keep_apart_what_float32_probabilities_tie(run):
    """Saturated experts tie in a float32 sum of probabilities (argmax then picks the lowest class); the mixture in
    log space is the float64 mixture's, and `float32_ties` counts the inputs the old sum tied."""
    r, _ = run
    h = torch.randn(4000, D, generator=torch.Generator().manual_seed(1)) * 30  # far outside: experts saturate
    d = torch.zeros(4000, dtype=torch.long)
    alpha = torch.full((4000, K), 1 / K)
    uniform = methods.methods(r)["uniform averaging"]
    log_p, _ = uniform(h, d)
    exact = torch.stack([e(h).double().log_softmax(-1) for e in r.experts], 1).exp().mean(1)  # float64 mixture
    old = ProbMixture(r.experts)(h, alpha)  # float32 probabilities, the computation before
    ties = torch.as_tensor(methods.float32_ties(uniform, h, d))
    assert ties.any() and not torch.as_tensor(methods.float32_ties(methods.methods(r)["RED"], h, d)).any()
    torch.testing.assert_close(log_p.double(), exact.log(), rtol=0, atol=1e-4)
    decided = exact.log().topk(2, 1).values.diff(dim=1).abs()[:, 0] > 1e-5  # a winner beyond float32's log rounding
    assert torch.equal(log_p.argmax(1)[decided], exact.argmax(1)[decided])
    assert (old.argmax(1)[ties] != log_p.argmax(1)[ties]).any()  # the old ties had hidden real differences


def test_subsample_picks_a_reproducible_fraction_of_distinct_rows():
    from redlib.red.pipeline import subsample

    pick = subsample(10, 0.5, seed=0)
    assert len(pick) == 5 and len(set(pick.tolist())) == 5 and all(0 <= i < 10 for i in pick.tolist())
    assert torch.equal(pick, pick.sort().values) and torch.equal(pick, subsample(10, 0.5, seed=0))
    assert len(subsample(3, 0.01, seed=1)) == 1  # never empty


def test_small_stages_trained_in_worker_processes_match_a_serial_run_bit_for_bit(run, tmp_path, monkeypatch):
    """workers=2 trains stages 2-4 (and the retrain helpers' stage 2) in spawned processes; every module, epoch and
    table is the serial run's, and each stage is counted once in the provenance (computed by a worker, then loaded)."""
    from redlib.core.store import state_equal

    serial, _ = run
    store = Store(tmp_path / "cache")
    data, enc = synthetic()
    cfg = tiny_config()
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    par = run_red(cfg, data, enc, store, seed=0)
    pairs = [(par.head, serial.head), (par.router, serial.router), (par.joint, serial.joint), (par.gate, serial.gate),
             (par.head_all, serial.head_all)]
    pairs += list(zip(par.experts + par.residuals + par.code_experts, serial.experts + serial.residuals + serial.code_experts))
    assert all(state_equal(a, b) for a, b in pairs)
    assert par.epochs == serial.epochs
    assert methods.score(par, "test")[0].equals(methods.score(serial, "test")[0])
    kinds = [e["kind"].split("/")[1] for e in store.events]
    assert store.hits == 0 and sorted(kinds) == sorted(["stage1", "features"] + ["expert", "residual", "code"] * K
                                                       + ["router", "joint", "gate", "head_all"])
    assert all(v > 0 for v in par.seconds.values())
    again = Store(store.root)  # a re-run loads everything here, starting no worker
    monkeypatch.setenv("REDLIB_WORKERS", "1")
    run_red(cfg, data, enc, again, seed=0)
    assert again.misses == 0 and again.hits == len(kinds)
    # the retrain helpers (robustness, the paper-lr extension) use the workers too, with the same bits
    alone = Store(tmp_path / "alone")
    for retrain in (retrain_residuals, retrain_experts):
        monkeypatch.setenv("REDLIB_WORKERS", "2")
        two, epochs_two = retrain(cfg, par, enc, store, seed=7)
        monkeypatch.setenv("REDLIB_WORKERS", "1")
        one, epochs_one = retrain(cfg, serial, enc, alone, seed=7)
        assert len(two) == K and all(state_equal(a, b) for a, b in zip(two, one)) and epochs_two == epochs_one


def test_small_stages_train_on_the_stage_thread_count_in_the_page_as_in_a_worker(tmp_path, monkeypatch):
    """A serial run trains every small stage on parallel.STAGE_THREADS threads, as a worker does (another count can
    train other bits), and gives the page its own thread count back; the count is in each stage's cache key."""
    from redlib.speed import parallel
    from redlib.red import stages

    seen: list[int] = []  # the thread count each stage trained on (a stack: once per stage in it)

    def counting_fit(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return stages_fit(*args, **kwargs)

    def counting_stack(models, *args, **kwargs):
        seen.extend([torch.get_num_threads()] * len(models))
        return stages_stack(models, *args, **kwargs)

    stages_fit, stages_stack = stages.fit, stages.fit_stacked
    monkeypatch.setattr(stages, "fit", counting_fit)
    monkeypatch.setattr(stages, "fit_stacked", counting_stack)
    data, enc = synthetic()
    store = Store(tmp_path / "cache")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_red(tiny_config(epochs=2), data, enc, store, seed=0)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert len(seen) > 1 + 3 * K and seen[0] == 2  # stage 1 on the page's threads, every small stage on 1
    assert set(seen[1:]) == {parallel.STAGE_THREADS}
    from safetensors import safe_open

    small = [e for e in store.events if e["kind"].split("/")[1] not in ("stage1", "features")]
    assert len(small) == len(seen) - 1
    for e in small:
        with safe_open(str(store.root / e["kind"] / e["entry"]), framework="pt") as f:
            assert f'"threads":{parallel.STAGE_THREADS}' in f.metadata()["key"].replace(" ", "")


def test_a_seed_without_the_variants_trains_none_of_their_stages(tmp_path):
    """Where the variant methods do not train (a range page's seeds past `variant_seeds`, the step decomposition's
    2x2 cells), no code expert, code gate, stage 4 or head on all of train is trained or cached, and the methods
    built on the run are the others, unchanged: the classifier experts, residuals, router and gate are the very
    stages a run with the variants trains (same cache entries)."""
    from redlib.configs.task1_addition import Task1Config

    cfg = tiny_config(epochs=5)
    data, enc = synthetic()
    store = Store(tmp_path)
    bare = run_red(cfg, data, enc, store, seed=0, variants=False)
    assert bare.joint is None and bare.head_all is None and bare.code_experts == [] and bare.code_gate is None
    kinds = {p.parent.name for p in tmp_path.rglob("*.safetensors")}
    assert not kinds & {"code", "code_gate", "joint", "head_all"} and {"expert", "residual", "router", "gate"} <= kinds
    built = methods.methods(bare)
    assert not set(built) & {"RED stage 4", "RED code variant", "global head (all of train)", methods.CODE_MOE}
    with pytest.raises(ValueError, match="no stage for RED stage 4"):
        methods.methods(bare, ["RED stage 4"])
    full = run_red(cfg, data, enc, store, seed=0)  # the variants on top: the shared stages load, not retrain
    shared = methods.predict(bare, names=list(built))
    for name, (pred, _) in methods.predict(full, names=list(built)).items():
        assert np.array_equal(pred, shared[name][0]), name
    assert {"RED stage 4", "RED code variant"} <= set(methods.methods(full))
    t1 = Task1Config.from_params(profile="full", n_seeds=3, seed=4, variant_seeds=1)
    assert [t1.variants_on(s) for s in t1.seeds] == [True, False, False]
    assert not Task1Config.from_params(profile="full", variant_seeds=0).variants_on(0)
    assert cfg.variants_on(7)  # a page without the parameter (MNIST) trains them on every seed


def test_the_small_stages_of_several_runs_train_in_one_pool_with_each_runs_bits(run, tmp_path, monkeypatch):
    """`prefetch_runs` trains two seeds' small stages in one pool of two workers (seed 1 without the variants); each
    seed's run then trains nothing and loads every stage, and seed 0's modules are the serial run's, bit for bit."""
    from redlib.core.store import state_equal
    from redlib.red.pipeline import small_jobs
    from redlib.red.schedule import prefetch_runs
    from redlib.red.stages import Stages

    serial, _ = run
    cfg, store = tiny_config(), Store(tmp_path / "cache")
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    plans, inputs = [], []
    for seed in (0, 1):
        data, enc = synthetic()
        st = Stages(cfg, data, enc, store, seed)
        st.base()
        st.features()
        plans.append((st, *small_jobs(cfg, K, seed == 0)))
        inputs.append((data, enc))
    prefetch_runs(plans, store)
    assert all(st.cached(job) for st, jobs, _ in plans for job in jobs)
    assert not plans[1][0].cached(("joint", None))  # seed 1 trains no variant
    computed = store.misses
    monkeypatch.setenv("REDLIB_WORKERS", "1")
    runs = [run_red(cfg, *inputs[seed], store, seed=seed, variants=seed == 0) for seed in (0, 1)]
    assert store.misses == computed
    par = runs[0]
    pairs = [(par.router, serial.router), (par.joint, serial.joint), (par.gate, serial.gate)]
    pairs += list(zip(par.experts + par.residuals + par.code_experts, serial.experts + serial.residuals + serial.code_experts))
    assert all(state_equal(a, b) for a, b in pairs) and par.epochs == serial.epochs
    assert runs[1].joint is None and not runs[1].code_experts


def test_a_stages_fit_is_the_configs_protocol_so_cached_stages_keep_their_keys():
    """`RedConfig.stage_settings` resolves each fit as the config's `fit_config` / `stage1_config` did stage by stage
    (the fields of every stage's cache key), with an extension's rates and epoch budget on top."""
    from dataclasses import replace

    cfg = tiny_config()
    plain, ext = cfg.stage_settings(), cfg.stage_settings({"router": 0.5, "stage1": 0.3}, {"max_epochs": 7})
    assert plain.fit("stage1", 4) == cfg.stage1_config(4, cfg.lr)
    assert plain.fit("expert", 4, "expert D1") == cfg.fit_config(4, "expert D1", cfg.head_lr)
    assert ext.fit("stage1", 4) == cfg.stage1_config(4, 0.3)
    assert ext.fit("router", 1, "router") == replace(cfg.fit_config(1, "router", 0.5), max_epochs=7)
    assert ext.fit("gate", 1, "gate") == replace(cfg.fit_config(1, "gate", cfg.head_lr), max_epochs=7)
    assert ext.lr("router") == 0.5 and ext.lr("residual") == cfg.head_lr and ext.lr("stage1") == 0.3


def test_a_run_and_a_workers_job_read_the_resolved_settings_and_never_the_config_again(tmp_path, monkeypatch):
    """Given the record, a run's stages, and a worker's job (which receives it in its context), ask the config for no
    rate, cap or patience: the settings are resolved once, where the run starts."""
    from dataclasses import replace

    from redlib.red.schedule import _train_job
    from redlib.red.stages import Stages

    cfg, (data, enc), store = tiny_config(epochs=3), synthetic(), Store(tmp_path)
    settings = replace(cfg, head_lr=0.05).stage_settings({"router": 0.01}, {"patience": 2})

    def refuse(*_, **__):
        raise AssertionError("a fit was resolved again from the config")

    for name in ("stage_settings", "fit_config", "stage1_config"):
        monkeypatch.setattr(RedConfig, name, refuse)
    r = run_red(cfg, data, enc, store, seed=0, settings=settings, variants=False)
    small = [e for e in r.epochs if e["stage"] != "stage 1"]
    assert {e["lr"] for e in small} == {0.05, 0.01} and {e["patience"] for e in small} == {2}
    assert r.settings is settings and r.epochs[0]["lr"] == cfg.lr
    st = Stages(cfg, data, enc, store, 1, settings=settings)
    st.base()
    st.features()
    context = {"cfg": cfg, "data": data, "seed": 1, "key": st.key, "dim": st.dim, "head": st.head, "settings": settings}
    _train_job(context, ("router", None), store)
    assert st.cached(("router", None))
