"""An executed page agrees with the ledger: every verdict its prose shows is the ledger's verdict of the claim it names.

A page's prose shows a verdict in one of three ways, each read from the values the page glued:

- a glued `<page>_v_<claim id with _ for .>` (`claims.verdict_keys`): the ledger's verdict of that claim;
- a glued text that names claims with their verdicts ("mn.red.acc holds, ..."; "t2.order holds → partly", where
  the word after the id is the protocol's verdict and the one after the arrow an extension's);
- a glued tally ("verdicts: holds 3, partly 1"): the count of each verdict over the page's claims.

Any other glued value that is a bare verdict ("holds") must be declared in its page module's `FINDINGS_VERDICTS`
(glue key -> the claim id whose ledger verdict it shows, or None for an extension's verdict, which no ledger row
holds); and "What we found" types no verdict of its own. `disagreements` lists every breach in words, so a test
can show them all.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from ..core.claims import load_claims, verdict
from .ledger import VERDICTS
from .registry import BY_NAME

_WORD = "|".join(re.escape(v) for v in VERDICTS)
_GLUE = re.compile(r"\{glue:(?:text|md)\}`([^`:]+)[^`]*`")
_KEY = re.compile(r"^[a-z0-9]+_v_(.+)$")
_PAIR = re.compile(r"`?\b([a-z0-9_]+(?:\.[a-z0-9_]+)+)\b`?:?\s+(" + _WORD + r")\b")
_TALLY = re.compile(r"(" + _WORD + r") (\d+)")
_TYPED = re.compile(r"\b(does not hold|holds|untestable here)\b")  # "partly" and "not comparable" are plain English too


def glued(nb: dict) -> dict[str, str]:
    """Every value an executed notebook glued, as the text its prose shows (a string's quotes removed)."""
    out: dict[str, str] = {}
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            for mime in ("text/markdown", "text/plain"):
                raw = data.get(f"application/papermill.record/{mime}")
                if name and raw is not None and name not in out:
                    text = "".join(raw) if isinstance(raw, list) else str(raw)
                    out[name] = _unquote(text) if mime == "text/plain" else text
    return out


def _unquote(text: str) -> str:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, str) else text


def prose(nb: dict) -> list[tuple[bool, str]]:
    """The page's Markdown cells in order, each with whether it lies in "What we found" (from that header to the
    next header of level 1 or 2)."""
    out, inside = [], False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        for line in text.splitlines():
            if re.match(r"^#{1,2} ", line):
                inside = line.lstrip("#").strip().lower() == "what we found"
        out.append((inside, text))
    return out


def disagreements(notebook: str | Path, verdicts: Mapping[str, str], declared: Mapping[str, str | None] | None = None,
                  page_claims: set[str] | None = None) -> list[str]:
    """Where the executed `notebook`'s prose shows a verdict other than the ledger's (`verdicts`: claim id -> the
    ledger's verdict), in words naming the page, the glue key and both verdicts. `declared`: the page module's
    `FINDINGS_VERDICTS`; `page_claims`: the claims its tally counts (None: a tally is not checked)."""
    path = Path(notebook)
    nb = json.loads(path.read_text())
    values, declared, known = glued(nb), dict(declared or {}), load_claims()
    where = path.stem
    out: list[str] = []

    def against(key: str, cid: str, shown: str) -> None:
        if cid not in known:
            out.append(f"{where}: `{key}` names {cid!r}, which is not a claim of the paper")
        elif shown != verdicts.get(cid, "not measured"):
            out.append(f"{where}: `{key}` shows {cid} {shown!r}, the ledger {verdicts.get(cid, 'not measured')!r}")

    for in_found, text in prose(nb):
        if in_found:
            for m in _TYPED.finditer(_GLUE.sub("", text)):
                out.append(f"{where}: \"What we found\" types the verdict {m.group(1)!r} (glue the ledger's)")
        for key in dict.fromkeys(_GLUE.findall(text)):
            shown = values.get(key)
            if shown is None:
                continue  # a value the page did not glue fails the strict build, not this check
            if m := _KEY.match(key):
                against(key, _claim_of(m.group(1), known), shown.strip())
            elif shown.startswith("verdicts: "):
                counted = Counter(verdicts[c] for c in (page_claims or ()) if c in verdicts)
                if page_claims is not None and dict(counted) != {v: int(n) for v, n in _TALLY.findall(shown)}:
                    ordered = sorted(counted.items(), key=lambda vn: (-vn[1], VERDICTS.index(vn[0])))
                    out.append(f"{where}: `{key}` tallies {shown[10:]!r}, the ledger "
                               + ", ".join(f"{v} {n}" for v, n in ordered))
            elif shown.strip() in VERDICTS:
                if key not in declared:
                    out.append(f"{where}: `{key}` shows the verdict {shown.strip()!r} without naming its claim "
                               "(glue the ledger's, or declare it in FINDINGS_VERDICTS)")
                elif declared[key] is not None:
                    against(key, declared[key], shown.strip())
            else:
                for cid, word in _PAIR.findall(shown):
                    if cid in known:
                        against(key, cid, word)
    return out


def _claim_of(underscored: str, known: Mapping) -> str:
    """The claim id a `_v_` key names (its dots written as underscores; an id may hold underscores of its own)."""
    return next((cid for cid in known if cid.replace(".", "_") == underscored), underscored.replace("_", "."))


def ledger_verdicts(results: str | Path) -> tuple[dict[str, str], dict[str, str]]:
    """The ledger's verdict of every claim the pages under `results` measured (each page's `<name>/claims.json`,
    by the ledger's rules; a later page's entry replaces an earlier one's, as in the ledger), and the page of each."""
    known, verdicts, pages = load_claims(), {}, {}
    for name in BY_NAME:
        path = Path(results) / name / "claims.json"
        if path.exists():
            for cid, entry in json.loads(path.read_text())["claims"].items():
                verdicts[cid], pages[cid] = verdict(known[cid], entry), name
    return verdicts, pages


def page_disagreements(book: str | Path, results: str | Path) -> list[str]:
    """`disagreements` for every registered page executed under `book` (a folder of .ipynb) against the ledger of
    `results` (the folder of the run that executed them), each page with its module's declarations."""
    verdicts, pages = ledger_verdicts(results)
    out = []
    for name, page in BY_NAME.items():
        path = Path(book) / f"{name}.ipynb"
        if path.exists():
            own = {cid for cid, nb in pages.items() if nb == name}
            out += disagreements(path, verdicts, getattr(page.module, "FINDINGS_VERDICTS", {}), own)
    return out
