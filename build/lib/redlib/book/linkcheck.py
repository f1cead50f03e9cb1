"""Check every internal link of a built HTML book: the target file exists and, if given, so does the anchor."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(errors="replace"))
    return p


def broken_links(html_dir: str | Path) -> list[str]:
    """'page -> href (why)' for each internal link whose file or anchor is missing."""
    html_dir = Path(html_dir)
    parsed: dict[Path, _Links] = {}
    broken = []
    for page in sorted(html_dir.rglob("*.html")):
        links = parsed.setdefault(page, _parse(page))
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue  # external: not fetched (no network)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(html_dir)} -> {href} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed.setdefault(target, _parse(target)).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(html_dir)} -> {href} (no such anchor)")
    return broken


