"""The built smoke book as a reader sees it, in headless Chromium at 1400 px: every table and figure fits the
content column, every table has a caption, no error text, NaN, None or unrendered template shows, and every
internal link resolves; and every page reads within a reader's length: at most 12,000 px tall, no visible table
over 2,000 px (one behind a click does not count), at most 350 words under "What we found", no header word broken
inside itself, no number that rounds to zero printed as "0.000", every experiment page's answer box within its
first 1,000 px, the intro's "RED − softmax MoE" difference on its first screen, and every commit a page names is
in this repository's history.

Runs after the smoke book is built (`make browser`, part of `make test`); it saves a full-page screenshot of every
page under `_build/screenshots/` for review. Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs
them) and selenium.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from redlib.book.registry import BY_NAME, PAGES
from redlib.core.paths import project_root

WIDTH = 1400
BOOK = Path(os.environ.get("REDLIB_BOOK_HTML", project_root() / "_build" / "smoke" / "_build" / "html")).resolve()
SHOTS = project_root() / "_build" / "screenshots"
CHROMIUM, DRIVER = shutil.which("chromium") or "/usr/bin/chromium", shutil.which("chromedriver") or "/usr/bin/chromedriver"

# Everything measured in the page itself: the content column, what sticks out of it, what reads wrong.
PROBE = r"""
const article = document.querySelector('article.bd-article') || document.querySelector('main');
const col = article.getBoundingClientRect();
const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
  (el.closest('[id]') ? ' in #' + el.closest('[id]').id : '') +
  (el.tagName === 'TABLE' && el.querySelector('caption') ? ' "' + el.querySelector('caption').innerText.slice(0, 60) + '"' : '');
const wide = [];
for (const el of article.querySelectorAll('table, img, svg, figure')) {  // code blocks scroll, as code does
  if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue;
  const r = el.getBoundingClientRect();
  const width = Math.max(r.width, el.scrollWidth || 0);
  if (r.width > 0 && (r.left < col.left - 2 || r.left + width > col.right + 2)) {
    wide.push(name(el) + ' is ' + Math.round(width) + ' px wide, the column ' + Math.round(col.width) + ' px');
  }
}
const uncaptioned = [...article.querySelectorAll('table')].filter(t => !t.querySelector('caption')).map(name);
const cells = [...article.querySelectorAll('td, th, span.pasted-text, .pasted-inline')].map(c => c.innerText.trim());
const text = article.innerText;
// a table behind a click (a closed <details>) still reports its laid-out height: it is not visible
const tall = [...article.querySelectorAll('table')].filter(t => !t.closest('details:not([open])'))
  .map(t => [t, t.getBoundingClientRect().height])
  .filter(([t, h]) => h > arguments[0]).map(([t, h]) => name(t) + ' is ' + Math.round(h) + ' px tall');
// a header word the browser wraps inside itself: one word, two lines (a break after a hyphen is between words)
const broken = [];
for (const th of article.querySelectorAll('th')) {
  const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    for (const m of node.textContent.matchAll(/[^\s-]+-?/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
}
// the prose under "What we found": its paragraphs and bullets, not its tables, figures, code or boxes
const sec = article.querySelector('section#what-we-found');
let words = 0;
if (sec) {
  const prose = sec.cloneNode(true);
  prose.querySelectorAll('h1, h2, h3, h4, table, figure, img, pre, details, .admonition, .cell_input, script, style')
    .forEach(e => e.remove());
  words = prose.textContent.split(/\s+/).filter(w => /\w/.test(w)).length;
}
const commits = [...text.matchAll(/commit\s+([0-9a-f]{7,40})/g)].map(m => m[1]);
// where the page's answer box starts, from the top of the page (null: the page has none)
const box = [...article.querySelectorAll('.admonition')].find(a => /^\s*The answer/.test(a.innerText));
const answer_top = box ? box.getBoundingClientRect().top + window.scrollY : null;
const answer_text = box ? box.innerText : "";
// where the book's main result is first stated: a "RED − softmax MoE" header or caption (the intro opens with it)
const duel = [...article.querySelectorAll('th, caption, p')].find(e => e.innerText.includes('RED \u2212 softmax MoE'));
const duel_top = duel ? duel.getBoundingClientRect().top + window.scrollY : null;
return {wide: wide, uncaptioned: uncaptioned, text: text, cells: cells, tall: tall, broken: broken,
        found_words: words, commits: commits, answer_top: answer_top, answer_text: answer_text, duel_top: duel_top,
        links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))};
"""
TALLEST_PAGE, TALLEST_TABLE, FOUND_WORDS = 12_000, 2_000, 350  # px at 1400 px wide; words under "What we found"
ANSWER_WITHIN = 1_000  # px from the top of an experiment page to its answer box
BAD_TEXT = ["Traceback", "Error:", "Exception", "{glue", "{{", "}}", "<br>", "&lt;", "&gt;",
            "± 0.000", "at most 0.000", "+0.000", "-0.000", "−0.000"]  # a number that rounds to zero says so
BAD_CELLS = {"nan", "NaN", "None", "none", "inf", "-inf", "<NA>"}
# a change that did not happen reads as none ("not at all"), never as a bound of zero
BAD_PATTERNS = [re.compile(r"at most 0(?![.\d])"), re.compile(r"by more than 0\.0+(?!\d)")]
# a claim id ("t1.order", "mn.red.acc"): the answer box says what a claim claims, in words
CLAIM_ID = re.compile(r"\b(?:toy|t1|t2|sd|mn|ra|rob|mod|abl|eff)\.[a-z0-9_]+(?:\.[a-z0-9_]+)*")


def pages() -> list[str]:
    """Every page of the book, as its HTML file name."""
    return [f"book/{p.name}.html" for p in PAGES]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a dev dependency: pip install -e .[dev]")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    assert Path(CHROMIUM).exists() and Path(DRIVER).exists(), \
        "headless Chromium is needed: apt-get install chromium chromium-driver (.ci/run does this)"
    assert (BOOK / "book" / "intro.html").exists(), f"no built book at {BOOK}: run `make book PROFILE=smoke` first"
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", f"--window-size={WIDTH},1000", "--hide-scrollbars",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(DRIVER))
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def look(driver, page: str) -> dict:
    """Load one page, screenshot it whole, and return what the probe found."""
    driver.set_window_size(WIDTH, 1000)
    driver.get((BOOK / page).as_uri())
    measure = ("return Math.max(...[document.documentElement, document.body, document.querySelector('.bd-main'),"
               " document.querySelector('article')].map(e => e ? e.scrollHeight + e.getBoundingClientRect().top : 0))")
    height, deadline = 0, time.time() + 3
    while time.time() < deadline:  # until the page's height settles (images and scripts still loading)
        now = driver.execute_script(measure)
        if now == height and now > 1000:
            break
        height = now
        time.sleep(0.25)
    driver.set_window_size(WIDTH, min(int(height) + 100, 16000))
    time.sleep(0.2)  # let the resized page lay out before the picture
    driver.save_screenshot(str(SHOTS / (Path(page).stem + ".png")))
    return {**driver.execute_script(PROBE, TALLEST_TABLE), "height": height}


def in_history(commit: str) -> bool:
    """Whether `commit` names a commit of this repository."""
    return subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=project_root(),
                          capture_output=True).returncode == 0


def problems(page: str, found: dict, trains: bool | None = None) -> list[str]:
    """What a reader would trip over on `page`, one line each (`trains`: whether it is an experiment page, which
    opens with its answer; by default, as the registry says)."""
    out = [f"{page}: {w}" for w in found["wide"]]
    out += [f"{page}: {t} has no caption" for t in found["uncaptioned"]]
    out += [f"{page}: the text shows {bad!r}" for bad in BAD_TEXT if bad in found["text"]]
    out += [f"{page}: the text shows {m.group(0)!r}" for pat in BAD_PATTERNS for m in pat.finditer(found["text"])]
    out += [f"{page}: the answer box names the claim id {c!r}" for c in CLAIM_ID.findall(found.get("answer_text", ""))]
    out += [f"{page}: a table cell or glued value reads {c!r}" for c in sorted(set(found["cells"]) & BAD_CELLS)]
    if found["height"] > TALLEST_PAGE:
        out.append(f"{page}: the page is {found['height']:,.0f} px tall (at most {TALLEST_PAGE:,})")
    out += [f"{page}: {t} (at most {TALLEST_TABLE:,} px visible)" for t in found["tall"]]
    out += [f"{page}: the header word {w!r} breaks inside itself" for w in sorted(set(found["broken"]))]
    if found["found_words"] > FOUND_WORDS:
        out.append(f"{page}: 'What we found' runs {found['found_words']} words (at most {FOUND_WORDS})")
    if trains if trains is not None else Path(page).stem in BY_NAME and BY_NAME[Path(page).stem].trains:
        if found["answer_top"] is None:
            out.append(f"{page}: no answer box")
        elif found["answer_top"] > ANSWER_WITHIN:
            out.append(f"{page}: the answer box starts {found['answer_top']:,.0f} px down (at most {ANSWER_WITHIN:,})")
    if Path(page).stem == "intro" and (found["duel_top"] is None or found["duel_top"] > ANSWER_WITHIN):
        out.append(f"{page}: no 'RED − softmax MoE' difference on the first screen (within {ANSWER_WITHIN:,} px)")
    out += [f"{page}: commit {c} is not in this repository's history" for c in sorted(set(found["commits"]))
            if not in_history(c)]
    for href in found["links"]:
        if href.startswith(("http", "mailto:", "#", "javascript:")) or not href:
            continue
        target = (BOOK / page).parent / href.split("#")[0]
        if href.split("#")[0] and not target.exists():
            out.append(f"{page}: the link {href!r} leads nowhere")
    return out


def test_every_page_reads_whole_at_book_width(browser):
    found = [p for page in pages() for p in problems(page, look(browser, page))]
    assert not found, "\n".join(found)


def spoiled(browser, edit, name: str) -> list[str]:
    """What the checks find on a copy of the toy page changed by `edit` (HTML -> HTML); the copy is removed after."""
    page = BOOK / "book" / "toy_experiments.html"
    bad = page.with_name(f"{name}.html")
    bad.write_text(edit(page.read_text()))
    try:
        return problems(f"book/{name}.html", look(browser, f"book/{name}.html"), trains=True)
    finally:
        bad.unlink()
        (SHOTS / f"{name}.png").unlink(missing_ok=True)


def test_the_check_fails_on_a_deliberately_over_wide_table(browser):
    """The probe is not blind: a copy of a page with a 3,000 px table is caught, naming the table."""
    table = '<table id="overwide"><caption>over-wide</caption><tr>' + "".join(
        f"<td>column {i} with a long header</td>" for i in range(60)) + "</tr></table>"
    found = spoiled(browser, lambda html: html.replace('<section id="', table + '<section id="', 1), "_overwide_check")
    assert any("table#overwide" in f and "px wide" in f for f in found), found


def test_the_check_fails_on_a_deliberately_tall_table_and_a_long_finding(browser):
    """The length checks are not blind: a 300-row table and 400 more words under "What we found" are caught, while
    the same table behind a click (a closed <details>) is not."""
    rows = "".join(f"<tr><td>row {i}</td></tr>" for i in range(300))
    tables = (f'<table id="tall"><caption>tall</caption>{rows}</table>'
              f'<details><table id="hidden"><caption>hidden</caption>{rows}</table></details>')
    words = "<p>" + " ".join(["word"] * 400) + "</p>"
    found = spoiled(browser, lambda html: html.replace('<section id="', tables + '<section id="', 1).replace(
        '<section id="what-we-found">', '<section id="what-we-found">' + words, 1), "_tall_check")
    assert any("table#tall" in f and "px tall" in f for f in found), found
    assert not any("table#hidden" in f for f in found), found
    assert any("'What we found' runs" in f for f in found), found


def test_the_check_fails_on_a_page_without_its_answer_box_and_on_a_zero_printed_as_0_000(browser):
    found = spoiled(browser, lambda html: html.replace("The answer", "An answer").replace(
        '<section id="', "<p>a change of ± 0.000</p>" + '<section id="', 1), "_answer_check")
    assert any("no answer box" in f for f in found), found
    assert any("'± 0.000'" in f for f in found), found


def test_the_check_fails_on_a_claim_id_in_the_answer_box_and_on_a_change_of_at_most_zero():
    quiet = {"wide": [], "uncaptioned": [], "text": "moved by at most 0.012", "cells": [], "height": 5000, "tall": [],
             "broken": [], "found_words": 100, "commits": [], "links": [], "answer_top": 300.0, "duel_top": None,
             "answer_text": "The answer: the ordering claim holds."}
    assert problems("book/t.html", quiet, trains=True) == []
    spoiled = {**quiet, "answer_text": "The answer: `t1.order` holds, mn.red.acc partly",
               "text": "removal moves it by at most 0 (MoE 0), by more than 0.0000"}
    found = problems("book/t.html", spoiled, trains=True)
    assert sum("claim id" in f for f in found) == 2 and sum("the text shows" in f for f in found) == 2, found


def test_the_check_fails_on_an_intro_whose_main_result_is_below_the_first_screen():
    quiet = {"wide": [], "uncaptioned": [], "text": "", "cells": [], "height": 5000, "tall": [], "broken": [],
             "found_words": 100, "commits": [], "links": [], "answer_top": None}
    assert problems("book/intro.html", {**quiet, "duel_top": 400.0}, trains=False) == []
    for top in (None, 2400.0):
        assert any("first screen" in p for p in problems("book/intro.html", {**quiet, "duel_top": top}, trains=False))
