"""The claims ledger as the book shows it: the verdict counts as badges, and one table per page whose rows read as
claim, paper, ours and verdict, with each row's notes and extensions behind a click."""

from __future__ import annotations

import html

import pandas as pd

from .ledger import COLOURS, VERDICTS, verdict_css, link
from .registry import PAGES

PLURAL = {"holds": "hold", "does not hold": "do not hold"}


def summary_html(counts: pd.Series) -> str:
    """The verdict counts as coloured badges."""
    badges = "".join(
        f'<span style="background:{COLOURS[v]};padding:0.3em 0.7em;margin:0 0.5em 0.4em 0;border-radius:4px;'
        f'display:inline-block;white-space:nowrap">'  # a badge wraps as a whole, never inside its words
        f"<b>{counts[v]}</b> {v}</span>" for v in VERDICTS)
    return f'<p role="status" aria-label="claims ledger summary">{badges}</p>'


def table_html(df: pd.DataFrame, caption: str = "Every claim of the paper: the paper's number, ours, and the verdict",
               uid: str = "ledger") -> str:
    """The ledger as an HTML table: verdicts coloured, ids linked to the section that measured them; each row's
    extensions and notes behind a click ("more"), so a row reads as claim, paper, ours and verdict."""
    shown = df.copy()
    shown["id"] = [f'<a href="{link(nb)}">{cid}</a><br><small>{sec} ({kind})</small>' if nb else
                   f"{cid}<br><small>{sec} ({kind})</small>"
                   for cid, nb, sec, kind in zip(df["id"], df["notebook"], df["section"], df["kind"])]
    shown["ours"] = [f"{o} <small>{s}</small>" if s else o for o, s in zip(df["ours"], df["spread over seeds"])]
    shown["ours"] += [f"<br><small>ours {m} the paper's</small>" if m else "" for m in df.get("miss", [""] * len(df))]
    more = [[f"<i>measure</i>: {m}" + (f" ({on})" if on else "")] if m else [] for m, on in
            zip(df["measure"].fillna(""), df["measured on"].fillna(""))]
    more = [m + ([f"<b>{n.partition(':')[0]}</b>:{n.partition(':')[2]}" if ":" in n else n] if n else [])
            for m, n in zip(more, df.get("note", pd.Series([""] * len(df))).fillna(""))]
    more = [m + ([f"<i>extension</i>: {x}"] if x else []) for m, x in zip(more, df["extension"].fillna(""))]
    shown["ours"] += [f"<details><summary><small>more</small></summary><small>{'<br>'.join(m)}</small></details>"
                      if m else "" for m in more]
    shown = shown[["id", "verdict", "claim", "paper", "ours"]]
    sty = shown.style.hide(axis="index").map(verdict_css, subset=["verdict"])
    sty = sty.set_uuid(uid).set_caption(caption)
    sty = sty.set_table_styles([{"selector": "td, th", "props": "font-size: 0.85em; vertical-align: top"},
                                {"selector": "small", "props": "font-size: 0.9em"}])
    # Styler leaves cell text unescaped, so the links stay links; the wrapper scrolls on narrow screens
    return f'<div style="overflow-x:auto">{sty.to_html()}</div>'


def sections_html(df: pd.DataFrame) -> str:
    """The ledger one table per page, in the book's order, each under the page's title."""
    out = []
    for page in PAGES:
        part = df[df["notebook"] == page.name]
        if len(part):
            out.append(f'<h3>{html.escape(page.title)}</h3>' + table_html(
                part, f"{page.title}: {len(part)} claims, the paper's number, ours, and the verdict", f"ledger-{page.name}"))
    rest = df[~df["notebook"].isin([p.name for p in PAGES])]
    if len(rest):
        out.append("<h3>Not measured yet</h3>" + table_html(rest, "Claims no page measures yet", "ledger-unmeasured"))
    return "\n".join(out)


def glance(df: pd.DataFrame, duel: pd.DataFrame | None = None) -> str:
    """Findings at a glance, as Markdown: one line per page, linked, with its verdict tally and the answer to its
    question: RED against the softmax MoE where the page has both (`duel`, `headline.red_vs_moe`: its first setting
    with room to rank), else its headline claim (`_headline`): the claim, our number, the paper's, the verdict."""
    lines = []
    duel = pd.DataFrame(columns=["page"]) if duel is None else duel
    for page in PAGES:
        part = df[(df["notebook"] == page.name) & (df["verdict"] != "not measured")]
        if not len(part):
            continue
        tally = ", ".join(f"{n} {PLURAL.get(v, v) if n > 1 else v}" for v in VERDICTS
                          if (n := int((part["verdict"] == v).sum())))
        head = f"- {{doc}}`{page.title} <{page.name}>` ({page.sections}; {len(part)} claims: {tally}). "
        rows = duel[duel["page"] == page.name]
        if len(rows):
            r = rows.iloc[0]
            sd = "" if r["sd"] != r["sd"] else f" ± {r['sd']:.3f}"
            rule, paper = r["by the ledger's rule"], r["paper's gap"]
            lines.append(head + f"*RED against the softmax MoE* ({r['setting']}): RED − MoE {r['RED − softmax MoE']:+.3f}"
                         f"{sd} over {r['seeds']} seed{'s' * bool(r['seeds'] != 1)}, **{rule}**; the paper's gap {paper}.")
            continue
        top = _headline(part, page.question)
        paper = f", the paper's {top['paper']}" if str(top["paper"]) not in ("", "-", "nan") else ""
        what = f" ({top['measure']})" if str(top.get("measure", "")) not in ("", "nan") else ""  # what our number is
        lines.append(head + f"*{top['claim']}*: ours {top['ours']}{what}{paper}: **{top['verdict']}**.")
    return "\n".join(lines)


def _headline(part: pd.DataFrame, question: str | None = None) -> pd.Series:
    """A page's headline claim: the claim that answers its question (`Page.question`) where it names one, else its
    first order claim, else its first claim about RED, else its first claim."""
    for hit in (part["id"] == question, part["kind"] == "order", part["id"].str.contains(r"\.red\.", regex=True)):
        if hit.any():
            return part[hit].iloc[0]
    return part.iloc[0]
