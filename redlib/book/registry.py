"""The page registry: every page of the book declared once.

The CLI's notebook list, the execution order, `_toc.yml`, the ledger's links, the intro's status table, the
reproduce page's tables, the cold-time budgets and the Speed page's names of the stage kinds all derive from
`PAGES`. Adding a section means: a notebook, its config module and its experiment module, both named as the notebook
(`configs/<name>.py`: the knobs; `experiments/<name>.py`: the computations, and `STAGE_KINDS` if it caches stages
of its own kinds), one `Page` entry here, and its claims in the claims file with a test.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..configs.mnist_label5 import MnistConfig
from ..configs.robustness_and_cost import RobustnessConfig
from ..configs.routing_heatmaps import RoutingHeatmapsConfig
from ..configs.step_decomposition import DecompositionConfig
from ..configs.task1_addition import Task1Config
from ..configs.task2_mixed import Task2Config
from ..configs.toy_experiments import ToyConfig
from ..core.config import NotebookConfig, PageConfig, ParameterError, page_config

# the book's numbered parts, in order (the intro is the root page, outside them)
PARTS = ("Reading this book", "Experiments", "Cost and robustness")


@dataclass(frozen=True)
class Page:
    """One page: its notebook name, title, part of the book, config, and what of the paper it covers."""

    name: str
    title: str
    part: str | None  # one of PARTS; None for the root page
    config: type[NotebookConfig]
    sections: str = ""  # the paper's sections it reproduces
    claim_groups: tuple[str, ...] = ()  # groups of the claims file it measures
    anchor: str | None = None  # label of the section where it discusses its claims
    budget: float | None = None  # minutes its full profile may take cold on the 2-core machine (`make bench` judges)
    budget_with: str | None = None  # or: the earlier page whose budget it shares (the pages' time is judged together)
    question: str | None = None  # the claim that answers the page's question, where its first order claim does not

    @property
    def trains(self) -> bool:
        """Experiment pages train; reading pages only read result files, so they run after every experiment."""
        return not issubclass(self.config, PageConfig)

    @property
    def module(self):
        """A training page's experiment module (`redlib/experiments/<name>.py`): the page's contract, three functions
        a notebook calls in this order, `run(cfg, store) -> tables`, `claims(cfg, tables)` and `found(cfg, tables,
        verdicts)` (CONTRIBUTING, "Adding a page"). None for a reading page."""
        return importlib.import_module(f"redlib.experiments.{self.name}") if self.trains else None


def _reading(name: str, title: str, part: str | None) -> Page:
    return Page(name, title, part, page_config(name))


PAGES: list[Page] = [
    _reading("intro", "Residual Expert Decomposition: a reproduction companion", None),
    _reading("claims_ledger", "Claims ledger", PARTS[0]),
    _reading("paper_vs_code", "Paper vs released code", PARTS[0]),
    _reading("reproduce", "Reproduce it", PARTS[0]),
    Page("toy_experiments", "Toy experiments: linear, MLP and residual experts", PARTS[1], ToyConfig,
         "toy experiments A-C (linear, MLP, residual experts)", ("toy",), "toy-claims", budget=4),
    Page("task1_addition", "Task 1: addition, RED against four baselines", PARTS[1], Task1Config,
         "4.1-4.6 arithmetic Task 1, RED and four baselines", ("task1_addition",), "t1-claims", budget=35),
    Page("task2_mixed", "Task 2: mixed arithmetic, RED against four baselines", PARTS[1], Task2Config,
         "4.2.2, 4.7 arithmetic Task 2 end to end", ("task2_mixed",), "t2-claims", budget=40),
    Page("step_decomposition", "Op experts, the step decomposer and program execution", PARTS[1], DecompositionConfig,
         "4.5.4, 4.5.5, 4.8 op experts, step decomposer, execution", ("step_decomposition",), "sd-claims",
         budget_with="task2_mixed"),
    Page("mnist_label5", "MNIST: five label-pair domains, RED against the baselines", PARTS[1], MnistConfig,
         "research code: MNIST label-pair five-domain benchmark", ("mnist_label5",), "mn-claims", budget=3),
    Page("routing_heatmaps", "Routing heatmaps: do MoE routers find pretrained experts?", PARTS[1], RoutingHeatmapsConfig,
         "routing-analysis MoE experiments 1-3 (code, '0 or 7' and domain experts)", ("routing_analysis",), "ra-claims",
         budget=5),
    Page("robustness_and_cost", "Robustness, modularity, ablations and cost", PARTS[2], RobustnessConfig,
         "4.9 ablations, 4.10 cost, RQ2-RQ3 routing noise and plug-in modularity",
         ("ablation", "robustness_modularity", "efficiency"), "rob-claims", budget=5, question="rob.routing_noise"),
    _reading("speed_and_memory", "Speed and memory", PARTS[2]),
]


@dataclass(frozen=True)
class Budget:
    """A cold-time budget: minutes the full profile of these pages may take together, from an empty stage cache
    (or, for a page that reuses other pages' stages, after them), on the 2-core machine; `make bench` judges it."""

    pages: tuple[str, ...]
    minutes: float




def _budgets() -> list[Budget]:
    """The cold-time budgets the pages declare, a page that shares one (`budget_with`) inside its partner's."""
    out = {p.name: Budget((p.name,), p.budget) for p in PAGES if p.budget is not None}
    for p in PAGES:
        if p.budget_with is not None:
            b = out[p.budget_with]
            out[p.budget_with] = Budget((*b.pages, p.name), b.minutes)
    return list(out.values())


BUDGETS = _budgets()
# the whole book cold, every page and the strict build, in one pass: what one developer session can hold (issue 76);
# the pages' own budgets add up to less
BOOK_MINUTES = 150
BY_NAME = {p.name: p for p in PAGES}
# every notebook in execution order: experiments first, then the pages that read their results
NOTEBOOKS: dict[str, type[NotebookConfig]] = {p.name: p.config for p in sorted(PAGES, key=lambda p: not p.trains)}


def stage_kinds() -> dict[str, str]:
    """What each stage kind of the cache holds (a kind is "<task>/<stage>"): the RED pipeline's, and those each page's
    experiment module declares in its `STAGE_KINDS`."""
    from ..red.types import STAGE_KINDS

    own = [getattr(p.module, "STAGE_KINDS", {}) for p in PAGES if p.trains]
    return {k: v for kinds in own for k, v in kinds.items()} | STAGE_KINDS


def page(name: str) -> Page:
    """The registered page of a notebook (one-line error listing the notebooks if unknown)."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ParameterError(f"unknown notebook {name!r}; allowed: {', '.join(NOTEBOOKS)}") from None


def config_for(notebook: str) -> type[NotebookConfig]:
    """The config class of a notebook."""
    return page(notebook).config


def render_toc() -> str:
    """`_toc.yml` as the registry says: the root page, then each numbered part with its pages in order."""
    root = next(p for p in PAGES if p.part is None)
    lines = ["# Generated from redlib/book/registry.py (the page registry) by every book build; edit the registry, not this.",
             "format: jb-book", f"root: book/{root.name}", "parts:"]
    for part in PARTS:
        chapters = [p for p in PAGES if p.part == part]
        if chapters:
            lines += [f"  - caption: {part}", "    numbered: true", "    chapters:"]
            lines += [f"      - file: book/{p.name}" for p in chapters]
    return "\n".join(lines) + "\n"
