"""Every page's first and last steps, called by the notebooks: `start` (config, results, kernels; `begin` for a
page that trains), `claims_table`, `glue_found` and `end`. The pages themselves are declared in `registry.py`.
"""

from __future__ import annotations

from . import ledger
from .registry import config_for


def start(name: str, namespace: dict, store=None):
    """A notebook's first step: its config from the parameters cell (validated, machine checked) and its Results."""
    from ..speed import kernels
    from .results import Results

    cfg = config_for(name).from_namespace(namespace)
    cfg.preflight()
    cfg.require_results()
    kernels.configure(stage1_precision(cfg))
    return cfg, Results(cfg, store=store)


def stage1_precision(cfg) -> str | None:
    """The precision of the stage 1 a page trains: its own `precision`, or that of the pages whose runs it reuses
    (bf16 if any is), or None where it trains none."""
    if hasattr(cfg, "precision"):
        return cfg.precision
    found = {c.precision for c in cfg.sources().values()} if hasattr(cfg, "sources") else set()
    return "bf16" if "bf16" in found else "fp32" if found else None


def begin(name: str, namespace: dict):
    """A training page's first step: `start` with a stage cache (`Store`), the plot style, and the page's opening
    line (its module's `profile_words(cfg)`) shown. Returns the config, the results and the store."""
    from IPython.display import Markdown, display

    from ..core.store import Store
    from .plots import set_style
    from .registry import page

    store = Store()
    cfg, results = start(name, namespace, store)
    set_style()
    display(Markdown(page(name).module.profile_words(cfg)))
    return cfg, results, store


def claims_table(results, measured: dict[str, dict]) -> None:
    """A page's claims recorded in its results and shown as the ledger judges them, then our extensions of them in a
    compact table of their own (each with what the same rule would say)."""
    from IPython.display import display

    from .plots import behind_click, styled

    results.record(measured)
    display(ledger.styled(ledger.page_table(results.claims)))
    ext = ledger.extension_table(results.claims)
    if not ext.empty:
        display(behind_click(styled(ext, caption="Our extensions, beside the paper's protocol: our value and what the "
                                    "ledger's rule would say of it (it never decides a claim's verdict)"),
                             f"Our extensions of these claims ({len(ext)} claims, {len(ext.columns)} "
                             f"setting{'s' * (len(ext.columns) > 1)})"))


def glue_found(results, found, cfg, t: dict) -> None:
    """Glue the numbers and verdict words of a page's "What we found" (`found(cfg, t, verdicts)`)."""
    from .glue import glue_values

    glue_values(found(cfg, t, ledger.verdicts(results.claims)))


def end(results) -> None:
    """A page's last step: its results finished (provenance written) and its provenance box shown."""
    from IPython.display import Markdown, display

    results.finish()
    display(Markdown(results.provenance_markdown()))
