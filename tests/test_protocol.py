"""The published profiles train under the protocol (issue 62): the paper's setup plus one guard, on every page that
runs the RED pipeline."""

import pytest

from redlib.configs.mnist_label5 import MnistConfig
from redlib.configs.step_decomposition import DecompositionConfig
from redlib.configs.task1_addition import Task1Config
from redlib.configs.task2_mixed import Task2Config

ARITHMETIC = [Task1Config, Task2Config, DecompositionConfig]


@pytest.mark.parametrize("config", [*ARITHMETIC, MnistConfig], ids=lambda c: c.NOTEBOOK)
def test_the_full_profile_is_the_protocol(config):
    """Linear expert heads, no rate chosen on validation loss (no parameter to ask for one), patience 10 for every
    stage (stage 1 included), and a cap that never decides; the arithmetic pages at the paper's 1e-4, MNIST at the
    research code's 1e-3."""
    cfg = config.from_params(profile="full")
    rate = 1e-3 if config is MnistConfig else 1e-4
    assert cfg.expert_hidden == 0
    assert not [n for n in cfg.param_names() if "grid" in n or "rung" in n or "beside" in n]
    assert (cfg.lr, cfg.head_lr, cfg.virtual_batch) == (rate, rate, 64)
    assert cfg.patience == 10 and (cfg.backbone_patience or cfg.patience) == 10 and cfg.double_cap
    tc = cfg.fit_config(0, "a stage")
    assert tc.double_cap and tc.patience == 10 and tc.lr == rate
    assert cfg.stage1_config(0, cfg.lr).patience == 10
