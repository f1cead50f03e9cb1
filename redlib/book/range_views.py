"""What the Task 1 and Task 2 pages show alike: test accuracy per method (the claims' setting beside the paper's, the
extensions behind a click), per output range, and the extension under the paper's epoch budgets."""

from __future__ import annotations

import pandas as pd
from IPython.display import display

from ..experiments import range_tables
from .plots import behind_click, main_and_rest, styled


def overall_tables(summary: pd.DataFrame, main: str) -> None:
    """A range page's test accuracy per method: the claims' setting (`main`) beside the paper's, the extensions behind
    a click (`summary`: `range_tables.overall_summary`)."""
    main_and_rest(summary, main, "Test accuracy in the claims' setting, mean and sd over seeds, beside the paper's",
                  "Test accuracy in the other settings (extensions), mean and sd over seeds")


def per_range(t: dict[str, pd.DataFrame], cfg) -> None:
    """Accuracy per output range in the claims' setting, mean over seeds, with the paper's rows beneath."""
    display(styled(range_tables.per_range_with_paper(t["per_range"], cfg.settings[0].label, cfg.KEY), precision=3,
                   caption="Accuracy per output range, mean over seeds, and the paper's"))


def paper_budgets(t: dict[str, pd.DataFrame], cfg) -> None:
    """The extension under the paper's epoch budgets, where it ran, behind a click: each method on the first seed of
    the claims' setting under our protocol and each budget, beside the paper's number."""
    if "paper_budget" in t:
        what = "Test accuracy on the first seed: our protocol, the paper's budgets, the paper's number"
        display(behind_click(styled(range_tables.budget_table(t, cfg.settings[0].label, cfg.seed, cfg.KEY),
                                    precision=4, caption=what), what))
