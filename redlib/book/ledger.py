"""The claims ledger: every claim of the paper joined with what the notebooks measured, and a verdict by rule.

This docstring states the one set of rules by which a measurement becomes a verdict (`verdict`, in `core/claims.py`,
where a page's own findings read it too): the ledger page and each page's own claims table both call it. Verdicts come from the claim's kind, every one judged seed by seed: `value` (each seed, and
each number of a per-range or per-case claim, within a tolerance of the paper's number), `order` (each compared
pair decided the claimed way by paired seeds, a difference inside their spread being a tie), `bound` (each seed
inside the stated range). A claim the setting cannot test is "untestable here": every value it compares at the
ceiling, or an order whose only ties are between two sides at the ceiling (the ledger page states both); a quantity
measured on other hardware and another backbone than the paper's is "not comparable" (our figure still shown); a
claim no notebook measured yet is "not measured", never blank.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.claims import (CEILING, NOT_COMPARABLE, VALUE_TOL, direction, elementwise_verdict, load_claims,
                           paired_order_verdict, per_seed_of, small, unbroken, verdict, verdicts,
                           verdicts_beside)  # noqa: F401 (verdicts_beside: the ledger's, where pages look for it)
from .registry import BY_NAME, PAGES
from .results import read
from .words import reader

VERDICTS = ("holds", "partly", "does not hold", "untestable here", "not comparable", "not measured")
COLOURS = {"holds": "#c8e6c9", "partly": "#fff3c4", "does not hold": "#ffcdd2", "untestable here": "#d4e4f4",
           "not comparable": "#e6dcef", "not measured": "#e0e0e0"}
def collect(results_root: str | os.PathLike, profile: str = "full", claims_file=None) -> dict[str, dict[str, Any]]:
    """Every claim measured by a registered page's last run, tagged with its notebook and provenance."""
    known = load_claims(claims_file)
    out: dict[str, dict[str, Any]] = {}
    for page in PAGES:
        res = read(page.name, profile, results_root)
        if not res.exists:
            continue
        for cid, entry in res.claims.items():
            if cid not in known:
                raise KeyError(f"{res.dir / 'claims.json'}: claim id {cid!r} is not in the paper's claims file")
            out[cid] = {**entry, "notebook": page.name, "provenance": res.provenance}
    return out


def view(cfg) -> tuple[dict[str, dict[str, Any]], pd.DataFrame, pd.Series]:
    """A reading page's view of every claim (`cfg`: its profile and results_dir): what the pages measured, the
    ledger's table of them, and the count of each verdict."""
    collected = collect(cfg.results_dir, cfg.profile)
    table_ = table(collected)
    return collected, table_, summary(table_)


def verdict_css(value: Any) -> str:
    """The background of a verdict cell (nothing for other cells)."""
    return f"background-color: {COLOURS[value]}" if value in COLOURS else ""


def _g(value: float) -> str:
    """Three significant digits, an exponent that never wraps ("1.61e-07")."""
    return unbroken(f"{value:.3g}")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return _g(value)
    if isinstance(value, dict):
        return ", ".join(f"{reader(k)}: {_fmt(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def page_of(group: str) -> str:
    """The page that measures a group of the claims file ('' for a group no page measures yet)."""
    return next((p.name for p in PAGES if group in p.claim_groups), "")


def _spread(entry: dict[str, Any]) -> str:
    """'± sd (n seeds, what varies)': the standard deviation over seeds, to three decimals, and whether each seed
    drew its own test data or all seeds shared one test split ('one seed: no spread' for one seed; a quantity no seed
    moves says what it is instead, in its `spread`)."""
    if "spread" in entry:
        return entry["spread"]
    per_seed = entry.get("per_seed")
    if not per_seed or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in per_seed):
        return ""
    if len(per_seed) < 2:
        return "one seed: no spread"
    sd = float(np.std(per_seed, ddof=1))  # the sample sd, as every page's tables
    params = (entry.get("provenance") or {}).get("parameters", {})
    page = BY_NAME.get(entry.get("notebook", ""))
    what = page.config.seed_data(params) if page else "seeds"  # whether the spread includes test sampling
    tiny = 0 < abs(float(np.mean(per_seed))) < 5e-4  # a mean shown in exponent form (`_fmt`) gets its spread so too
    shown = f"± {_g(sd)}" if tiny and sd else f"± {small(sd)}"
    return f"{shown} ({len(per_seed)} seeds, {what})"


def table(collected: dict[str, dict[str, Any]], claims_file=None, tol: float = VALUE_TOL) -> pd.DataFrame:
    """One row per claim of the paper: section, claim, paper's value, ours, spread, measured on, verdict, notebook."""
    rows = []
    for cid, claim in load_claims(claims_file).items():
        entry = collected.get(cid)
        prov = (entry or {}).get("provenance", {})
        params = prov.get("parameters", {})
        page = BY_NAME.get((entry or {}).get("notebook", ""))
        on = ", ".join(f"{k} {params[k]}" for k in ("backbone", "split", "dataset_size") if k in params) or (
            page.config.MEASURED_ON if page else "")
        if prov.get("non_default"):  # a published page run with parameters other than the profile's defaults
            on += "; non-default: " + ", ".join(f"{k}={v}" for k, v in prov["non_default"].items())
        rows.append({
            "id": cid, "verdict": verdict(claim, entry, tol), "group": claim["group"], "section": claim["section"],
            "kind": claim["kind"], "claim": claim["claim"], "paper": _fmt(claim["paper"]),
            "ours": _fmt(entry.get("value")) if entry else "not measured",
            "measure": (entry or {}).get("measure", ""),
            "spread over seeds": _spread(entry) if entry else "",
            "measured on": on, "notebook": entry["notebook"] if entry else "",
            "extension": extension(claim, entry, tol) if entry else "",
            "miss": miss(claim, entry, tol) if entry else "",
            "note": note(claim, entry, collected) if entry else "",
        })
    return pd.DataFrame(rows)


def miss(claim: dict[str, Any], entry: dict[str, Any], tol: float = VALUE_TOL) -> str:
    """Where a value claim that does not hold misses: ours 'above', 'below' or on 'both sides' of the paper's
    numbers (over every seed and case); '' for a claim that holds or is not a numeric value claim."""
    if claim["kind"] != "value" or verdict(claim, entry, tol) in ("holds", "not comparable", "not measured"):
        return ""
    paper = claim["paper"]
    if isinstance(paper, list) and len(paper) == 2 and not isinstance(entry.get("value"), list):
        return ""  # a range, not a per-range list
    return direction(per_seed_of(entry), paper)


def note(claim: dict[str, Any], entry: dict[str, Any], collected: dict[str, dict[str, Any]] | None = None) -> str:
    """What a verdict rests on when it is not plain: a quantity not comparable with the paper's, an order decided
    as a tie (the difference inside the spread of the seeds' paired differences), an order judged without paired
    scores, or a setting whose test scores sit at the ceiling."""
    words = []
    if claim.get("id") in NOT_COMPARABLE:
        words.append(f"not comparable: {NOT_COMPARABLE[claim['id']]}")
    elif claim["kind"] == "order" and entry.get("pairs"):
        words.append(paired_order_verdict(entry["pairs"])[1])
    elif claim["kind"] == "order":
        words.append("judged on whether the ordering holds in each seed: this measurement records no paired scores, "
                     "so a tie is not tested")
    own = entry.get("value")
    at_top = isinstance(own, (int, float)) and not isinstance(own, bool) and own >= CEILING
    if (at_top or claim.get("id") in HEADROOM) and (top := _task1_ceiling(entry, collected or {})) is not None:
        words.append(f"measured on Task 1's iid test, at the ceiling here (RED {top:.3f}: the test re-asks questions "
                     "seen in training)" + (f": {HEADROOM[claim['id']]}" if claim.get("id") in HEADROOM else ""))
    return "; ".join(w for w in words if w)


def _task1_ceiling(entry: dict[str, Any], collected: dict[str, dict[str, Any]]) -> float | None:
    """RED's Task 1 accuracy when a claim is measured on Task 1's iid split and that split sits at the ceiling."""
    red = collected.get("t1.red.acc") or {}
    on_task1 = entry.get("task") == "Task 1" or entry.get("notebook") == "task1_addition"
    if on_task1 and entry.get("split", entry.get("run", "iid")) == "iid" and isinstance(red.get("value"), (int, float)):
        return float(red["value"]) if float(red["value"]) >= CEILING else None
    return None


def extension(claim: dict[str, Any], entry: dict[str, Any], tol: float = VALUE_TOL) -> str:
    """Our extensions' measurements of a claim (another split, backbone, ...), each with what the rule would say.

    They are shown beside the paper's protocol; the claim's verdict stays the one of the paper's protocol.
    """
    return "; ".join(f"{label}: {_fmt(e.get('value'))} ({verdict(claim, e, tol)})"
                     for label, e in entry.get("extensions", {}).items())


# What each page's re-run in the last re-publication changed, in a few words (prose; the numbers are in the pages),
# keyed by notebook; each re-publication rewrites it, after saving the verdicts it replaces in
# results/verdicts_before.csv. A page not named here and re-run gets "re-measured".
_PAPER_SETUP = ("experts as the paper's linear heads, every stage at the paper's learning rate (no rate chosen on "
                "validation loss), each trained until 10 epochs without improvement end it")
REPUBLICATION_CAUSES = {
    "task1_addition": _PAPER_SETUP,
    "task2_mixed": _PAPER_SETUP,
    "step_decomposition": _PAPER_SETUP,
    "mnist_label5": ("experts as linear heads at the research code's learning rate (no rate chosen on validation "
                     "loss), each stage trained until 10 epochs without improvement end it"),
    "toy_experiments": "re-run (its protocol unchanged)",
    "routing_heatmaps": "re-run (its protocol unchanged)",
    "robustness_and_cost": "re-measured on the re-run stages of Task 1, Task 2 and MNIST"}
# the ledger's own rules, as causes of a changed verdict
RULE_CAUSES = {"untestable here": "the ledger's rule: every value the claim compares is at 0.995 or above, so it "
                                  "cannot be tested here",
               "not comparable": "the ledger's rule: our figure is measured on other hardware and another backbone"}
UNCHANGED_RUN_CAUSE = ("the ledger's rules as they stand now (every claim judged seed by seed, element by element); "
                       "the page itself was not re-run since")
PER_SEED_CAUSE = "the ledger's rule: every number of the claim judged seed by seed (before: the mean over seeds)"
# claims whose measurement on a saturated setting says little, and where the book measures them with headroom
HEADROOM = {"mod.plug_in": "changes of 0.000 on domains already at 1.000 say little; the MNIST extension, with headroom, "
                           "is where a plug-in change can show on other domains"}


def changes(df: pd.DataFrame, before: str | os.PathLike, collected: dict[str, dict[str, Any]] | None = None,
            claims_file=None) -> pd.DataFrame:
    """Each claim whose verdict differs from the previous publication's (`before`: id, verdict, published_at), with
    the cause in a few words: one of the ledger's rules, a tie under the paired rule, or the page's re-run."""
    old, claims = pd.read_csv(before), load_claims(claims_file)
    merged = df.merge(old[["id", "verdict", "published_at"]], on="id", suffixes=("", " before"), how="left")
    moved = merged[merged["verdict"] != merged["verdict before"]]
    before_ = dict(zip(moved["id"], moved["verdict before"]))
    entries = collected or {}
    kept = Path(before).with_name(CLAIMS_BEFORE)  # the previous publication's measurements, where the pass kept them
    old_entries = json.loads(kept.read_text()) if kept.exists() else None

    def cause(cid: str, now: str, note_: str, nb: str, at: str) -> str:
        paper = claims[cid]["paper"] if cid in claims else None
        ran = str((entries.get(cid, {}).get("provenance") or {}).get("git_commit", ""))
        if old_entries is not None and cid in claims:  # the old numbers under today's rules say which moved it
            then = verdict(claims[cid], old_entries.get(cid))
            rerun = REPUBLICATION_CAUSES.get(nb, "re-measured") if nb else "not measured now"
            if then == now:
                return (f"the ledger's rules: the previous numbers, judged by today's rules, read {now!r} already"
                        + (f" ({RULE_CAUSES[now]})" if now in RULE_CAUSES else ""))
            if then == before_[cid]:
                return f"the re-run: the previous numbers, judged by today's rules, still read {then!r}; {rerun}"
            return f"the rules and the re-run: the previous numbers, judged by today's rules, read {then!r}; {rerun}"
        if now in RULE_CAUSES:
            return RULE_CAUSES[now]
        if str(note_).startswith("tie"):
            return "tie: the difference is not 0.01 beyond the seeds' spread"
        if (cid in claims and claims[cid]["kind"] == "value" and isinstance(paper, (dict, list))
                and cid in entries and elementwise_verdict([entries[cid]["value"]], paper, VALUE_TOL) == before_[cid]):
            return PER_SEED_CAUSE  # the mean-over-seeds rule would still say what the previous publication said
        if ran and str(at) not in ("", "nan") and ran.startswith(str(at)):
            return UNCHANGED_RUN_CAUSE  # the same run as before: only the rule that reads it can have moved
        return REPUBLICATION_CAUSES.get(nb, "re-measured") if nb else "not measured now"

    causes = [cause(c, v, n, nb, at) for c, v, n, nb, at in zip(
        moved["id"], moved["verdict"], moved.get("note", [""] * len(moved)), moved["notebook"], moved["published_at"])]
    return pd.DataFrame({"id": moved["id"], "before": moved["verdict before"].fillna("not in the ledger"),
                         "now": moved["verdict"], "cause": causes,
                         "previous publication": moved["published_at"]}).reset_index(drop=True)


CLAIMS_BEFORE = "claims_before.json"  # beside verdicts_before.csv: the measurements a re-publication replaces


def snapshot(results_root: str | os.PathLike, profile: str = "full") -> pd.DataFrame:
    """The ledger's verdicts on the committed results (the ledger page is built from them, never committed) with the
    commit each claim's page was published at: what a re-publication saves as results/verdicts_before.csv before it
    re-runs the pages."""
    shown = table(collect(results_root, profile))
    commits = {page.name: str(read(page.name, profile, results_root).provenance.get("git_commit", ""))[:7]
               for page in PAGES if read(page.name, profile, results_root).exists}
    return shown[["id", "verdict", "notebook"]].assign(published_at=shown["notebook"].map(commits).fillna(""))


def summary(df: pd.DataFrame) -> pd.Series:
    """Counts of each verdict, in the ledger's order (zeros included)."""
    return df["verdict"].value_counts().reindex(VERDICTS, fill_value=0)


def link(notebook: str) -> str:
    """Relative HTML link to where a notebook discusses its claims (the registry's anchor)."""
    anchor = BY_NAME[notebook].anchor
    return f"{notebook}.html" + (f"#{anchor}" if anchor else "")


def page_table(measured: dict[str, dict[str, Any]], claims_file=None, tol: float = VALUE_TOL) -> pd.DataFrame:
    """A page's own claims table: each claim it measured, the paper's number, ours, spread and the ledger's verdict
    (our extensions' measurements are in `extension_table`)."""
    claims, judged = load_claims(claims_file), verdicts(measured, claims_file, tol)
    df = pd.DataFrame([{
        "claim": cid, "the paper says": claims[cid]["claim"], "paper": _fmt(claims[cid]["paper"]),
        "ours (mean)": _fmt(entry.get("value")) + (f" ({entry['measure']})" if entry.get("measure") else ""),
        "spread over seeds": _spread({"notebook": page_of(claims[cid]["group"]), **entry}), "verdict": judged[cid]}
        for cid, entry in measured.items()])
    return _shared_note(df, "spread over seeds")


def _shared_note(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """`df` with the bracketed note that every filled cell of `column` ends with ("(3 seeds, each seed its own data)")
    said once, in the column's header, instead of in every cell."""
    filled = [v for v in df.get(column, ()) if v]
    note = filled[0][filled[0].rfind(" ("):] if filled and filled[0].endswith(")") and " (" in filled[0] else ""
    if not note or not all(v.endswith(note) for v in filled):
        return df
    return df.assign(**{column: [v[: -len(note)] if v else v for v in df[column]]}).rename(
        columns={column: f"{column}{note}"})


def extension_table(measured: dict[str, dict[str, Any]], claims_file=None, tol: float = VALUE_TOL) -> pd.DataFrame:
    """Our extensions of a page's claims, one row per claim and one column per extension setting: our value and, in
    brackets, what the ledger's rule would say of it (never the claim's verdict). Empty when the page has none."""
    claims = load_claims(claims_file)
    rows = {cid: {label: f"{_fmt(e.get('value'))} ({verdict(claims[cid], e, tol)})"
                  for label, e in entry.get("extensions", {}).items()} for cid, entry in measured.items()}
    rows = {cid: r for cid, r in rows.items() if r}
    return pd.DataFrame.from_dict(rows, orient="index").fillna("-").rename_axis("claim") if rows else pd.DataFrame()


def styled(df: pd.DataFrame, caption: str = "The paper's claims measured on this page: our value, the paper's, "
           "the verdict"):
    """A table with a `verdict` column, verdicts coloured as in the ledger."""
    from .plots import styled as house

    return house(df, hide_index=True, caption=caption).map(verdict_css, subset=["verdict"])


def status(collected: dict[str, dict[str, Any]], claims_file=None) -> pd.DataFrame:
    """What the book reproduces: per page, the part of the paper, its claims, how many measured, and how many hold."""
    claims = load_claims(claims_file)
    entries = [(p.sections, f"{{doc}}`{p.name}`", p.claim_groups) for p in PAGES if p.claim_groups]
    rows = []
    for sections, where, groups in entries:
        ids = [cid for cid, c in claims.items() if c["group"] in groups]
        done = [verdict(claims[cid], collected[cid]) for cid in ids if cid in collected]
        rows.append({"paper": sections, "page": where, "claims": len(ids), "measured": len(done),
                     "hold": done.count("holds"), "partly": done.count("partly"), "do not hold": done.count("does not hold"),
                     "untestable or not comparable": done.count("untestable here") + done.count("not comparable")})
    return pd.DataFrame(rows)
