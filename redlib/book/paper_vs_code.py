"""What the paper-vs-code page says about our runs' protocol, generated from each page's recorded parameters (its
claims.json provenance), never typed: the training rule, the data mixes, the sizes, MNIST's setup."""

from __future__ import annotations

import os

from ..configs.ranges import mix_words
from ..configs.red import protocol_words, upgraded
from ..core.config import NotebookConfig
from .registry import config_for
from .results import read

SPOKEN_OF = ("task1_addition", "task2_mixed", "step_decomposition", "mnist_label5")  # the pages whose runs it describes


def recorded(page: str, profile: str = "full", root: str | os.PathLike = "results") -> NotebookConfig | None:
    """A page's config as its last run resolved it (None: the page has not run)."""
    res = read(page, profile, root)
    if not res.exists:
        return None
    config = config_for(page)
    params = upgraded(res.provenance["parameters"])  # an older run's extension switches as today's `extensions`
    return config.from_params(**{k: v for k, v in params.items() if k in config.param_names()})


def run_facts(profile: str = "full", root: str | os.PathLike = "results") -> dict[str, str]:
    """The page's protocol words (`pvc_*`), each from the recorded parameters of the page it speaks of."""
    t1, t2, sd, mn = (recorded(p, profile, root) for p in SPOKEN_OF)
    missing = "not run yet"
    return {
        "pvc_protocol": protocol_words(t1) if t1 else missing,
        "pvc_t2_mix": (f"{mix_words(t2.step_mix)} one/two-operation expressions for the claims"
                       + "".join(f", {mix_words(st.mix)} as an extension" for st in t2.settings if st.mix)
                       if t2 else missing),
        "pvc_sd_mix": f"{mix_words(sd.step_mix)} programs of 2/3/4 steps" if sd else missing,
        "pvc_sizes": ", ".join(f"{name} '{cfg.dataset_size}' ({'/'.join(f'{n:,}' for n in cfg.sizes)})"
                               for name, cfg in (("Task 1", t1), ("Task 2", t2), ("step decomposition", sd)) if cfg)
        or missing,
        "pvc_mnist_setup": (f"{mn.data_label}, {protocol_words(mn)}" if mn else missing),
    }
