"""The notebooks' parameters as a reader meets them: this run's on each page, the common ones and every notebook's
full list on the Reproduce page. The configs declare them; this module only shows them."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core.config import PROFILES, _type_name
from .registry import PAGES, config_for
from .plots import header, styled

# the parameters a reader is most likely to change, in the order the Reproduce page lists them
COMMON = ("seed", "n_seeds", "device", "backbone", "dataset_size", "split", "data_dir")


def parameter_docs(notebook: str) -> dict[str, str]:
    """What each parameter of a notebook does, from its config (the one place a parameter is declared)."""
    cls = config_for(notebook)
    return {name: cls.describe(name) for name in cls.param_names()}


def shown_value(value: Any) -> str:
    """A parameter value for a reader: its Python literal, or 'unset' (see its description) for None."""
    return "unset" if value is None else repr(value)


def this_run(cfg):
    """This run's parameters for a reader: name, value and what it does (a page's `parameters` cell, resolved)."""
    docs, changed = parameter_docs(cfg.NOTEBOOK), cfg.non_default()
    rows = [{"parameter": name, "value": shown_value(value) + (" (changed)" if name in changed else ""),
             "what it does": docs.get(name, "")} for name, value in cfg.asdict().items()]
    return styled(pd.DataFrame(rows), caption=f"Parameters of this run (profile {cfg.profile}); re-run with "
                  f"`python -m redlib run {cfg.NOTEBOOK} -p NAME VALUE`", hide_index=True)


def parameter_table() -> pd.DataFrame:
    """Every parameter of every experiment notebook: description, type, default, smoke and full values, allowed values."""
    rows = []
    for page in (p for p in PAGES if p.trains):  # reading pages take only profile / seed / device / results_dir
        notebook, cls = page.name, page.config
        docs, types_ = parameter_docs(notebook), cls.field_types()
        for name in cls.param_names():
            default = cls.default(name)
            row = {"notebook": notebook, "parameter": name, "description": docs.get(name, ""),
                   "type": _type_name(types_[name]), "default": "the profile's" if default is None else repr(default)}
            for p in PROFILES:
                row[f"{p} value"] = shown_value(cls.PROFILE_DEFAULTS[p].get(name, default)) if default is None else ""
            row["allowed"] = ", ".join(map(str, cls.CHOICES.get(name, PROFILES if name == "profile" else ())))
            rows.append(row)
    return pd.DataFrame(rows)


def common_table(table: pd.DataFrame) -> pd.DataFrame:
    """The `COMMON` parameters across notebooks: what each does, which notebooks take it, its full-profile value; one
    row per description and allowed values, so a parameter that means or allows something else on some notebooks
    (a reading page's `device`, Task 2's `split`) gets a row of its own for those."""
    rows = []
    for name in COMMON:
        hit = table[table["parameter"] == name]
        for (what, allowed), part in hit.groupby(["description", "allowed"], sort=False):
            full = part["full value"].where(part["full value"] != "", part["default"])
            rows.append({"parameter": name, "what it does": what,
                         "notebooks": ", ".join(part["notebook"]) if len(part) < len(set(table["notebook"])) else "all",
                         "full profile": ", ".join(dict.fromkeys(full)), "allowed": allowed})
    return pd.DataFrame(rows)


def by_notebook_html(table: pd.DataFrame) -> str:
    """Every notebook's full parameter list, each behind a click (a closed `<details>`)."""
    out = []
    for notebook, part in table.groupby("notebook", sort=False):
        sty = styled(part.drop(columns="notebook"), hide_index=True, caption=f"{notebook}: every parameter")
        sty = sty.set_table_styles([{"selector": "td, th", "props": "font-size: 0.8em; vertical-align: top"}])
        out.append(f"<details><summary><code>{header(notebook)}</code>: {len(part)} parameters</summary>"
                   f"{sty.to_html()}</details>")
    return "\n".join(out)
