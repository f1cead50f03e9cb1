"""The `device` parameter on a GPU: every trained page's pipeline runs on CUDA, and the stage cache keeps GPU-trained
stages apart from CPU ones. Skipped where there is no CUDA (CI, the 2-core machine); run on a lent GPU machine."""

import warnings

import numpy as np
import pytest
import torch

from redlib.configs.mnist_label5 import MnistConfig
from redlib.configs.routing_heatmaps import RoutingHeatmapsConfig
from redlib.configs.step_decomposition import DecompositionConfig
from redlib.configs.task1_addition import Task1Config
from redlib.core.store import Store, state_equal
from redlib.experiments import step_decomposition as dec
from redlib.experiments import routing_heatmaps as ra
from redlib.experiments import mnist_label5, ranges, task1_addition
from redlib.configs.ranges import Setting
from redlib.models.backbone import Backbone
from redlib.tasks import mnist as digits
from redlib.tasks import text_domains as td

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def tiny_routing(**kw) -> RoutingHeatmapsConfig:
    """The routing page's config on tiny sizes, on the GPU."""
    return RoutingHeatmapsConfig.from_params(**{**dict(profile="smoke", n_seeds=1, eval_samples=6, code_samples=12,
                                                  domain_pretrain_samples=8, domain_moe_samples=12, code_d_model=16,
                                                  domain_d_model=16, code_heads=2, domain_heads=2, code_ff=32,
                                                  domain_ff=32, device="cuda"), **kw})


TEXTS = ["What is 12 plus 7?", "Add 3 and 400.", "What is the sum of 61 and 58?"]


def test_the_frozen_prefix_on_cuda_equals_the_full_forward_and_the_cpu_one(tiny_qwen):
    gpu, cpu = Backbone(str(tiny_qwen), 2, device="cuda"), Backbone(str(tiny_qwen), 2)
    tok = gpu.tokenize(TEXTS)
    with torch.no_grad():
        full = gpu(tok)
        cached = gpu.forward_top(gpu.prefix(tok, batch_size=2), tok.attention_mask)
        on_cpu = cpu(cpu.tokenize(TEXTS))
    assert full.device.type == "cuda" and tok.input_ids.device.type == "cuda"
    torch.testing.assert_close(cached, full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(full.cpu(), on_cpu, rtol=1e-4, atol=1e-4)


def test_task1_trains_on_cuda_reloads_and_stays_apart_from_cpu_stages(tiny_qwen, tmp_path):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), max_epochs=2, backbone_epochs=1,
                                        head_lr=1e-2, device="cuda")
    bb = ranges.backbone(cfg)
    assert bb.device.type == "cuda"
    run = ranges.run(cfg, task1_addition.frames, 0, Setting("iid"), bb, Store(tmp_path))
    overall = ranges.evaluate(run)["overall"]
    assert overall["accuracy"].between(0, 1).all() and len(overall) > 5
    again = Store(tmp_path)
    rerun = ranges.run(cfg, task1_addition.frames, 0, Setting("iid"), bb, again)
    assert again.events and all(e["event"] == "loaded" for e in again.events)
    assert ranges.evaluate(rerun)["overall"]["accuracy"].tolist() == overall["accuracy"].tolist()
    on_cpu = Task1Config.from_params(**{**cfg.asdict(), "device": "cpu"})
    cpu = Store(tmp_path)
    ranges.run(on_cpu, task1_addition.frames, 0, Setting("iid"), ranges.backbone(on_cpu), cpu)
    loaded = [e["entry"] for e in cpu.events if e["event"] == "loaded"]
    assert cpu.events and not loaded, loaded  # the CPU run trains its own stages, it never takes the GPU's


def test_the_step_decomposition_runs_with_its_backbone_on_cuda(tiny_qwen, tmp_path):
    cfg = DecompositionConfig.from_params(profile="smoke", backbone=str(tiny_qwen), max_epochs=2,
                                              backbone_epochs=1, op_samples=300, tagger_epochs=2, head_lr=1e-2,
                                              extensions=[], device="cuda")
    t = dec.run(cfg, 0, Setting("iid"), ranges.backbone(cfg), Store(tmp_path))
    assert t["execution"]["accuracy"].between(0, 1).all() and len(t["decomposer"]) == cfg.sizes[2]


def test_a_tiny_mnist_run_on_cuda_beats_chance(tmp_path):
    cfg = MnistConfig.from_params(profile="smoke", max_epochs=2, backbone_epochs=2, device="cuda")
    parts = digits.splits(None, split_seed=0)
    parts = {k: (x[: len(x) // 4], y[: len(y) // 4]) for k, (x, y) in parts.items()}  # 1,000 / 125 / 125 digits
    run = mnist_label5.run_seed(cfg, 0, parts, Store(tmp_path))
    acc = mnist_label5.evaluate(run)["overall"].set_index("method")["accuracy"]
    assert acc["oracle experts"] > 0.3 and acc["RED"] > 0.2  # chance is 0.1


def test_the_routing_models_train_on_cuda(tmp_path):
    cfg = tiny_routing(digit_hidden=32)
    data = ra.digit_data(cfg)
    moe, _ = ra.digit_experiment(cfg, 0, data, Store(tmp_path))
    assert next(moe.parameters()).device.type == "cuda"
    rows, acc = ra.digit_routing(moe, data)
    assert acc > 0.5 and np.isin(rows["top"], range(4)).all()
    code, corpus, _ = ra.code_experiment(cfg, 0, td.load_tokenizer("embedded"), Store(tmp_path))
    assert set(ra.text_routing(code, corpus)["expert"]) <= set(range(4))


def test_a_cuda_rerun_trains_the_same_weights_on_deterministic_kernels(tmp_path):
    """The routing page's attention models, trained twice from scratch on the GPU, end bit for bit the same, and no
    kernel that torch knows to be non-deterministic runs (a fused attention backward would say so)."""
    cfg = tiny_routing()
    tok = td.load_tokenizer("embedded")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*deterministic")
        first, _, _ = ra.code_experiment(cfg, 0, tok, Store(tmp_path / "a"))
        second, _, _ = ra.code_experiment(cfg, 0, tok, Store(tmp_path / "b"))
    assert state_equal(first, second)
