"""Figures legible at the book's width: no text under `MIN_PX` pixels as a reader sees it at 1400 px.

A figure is shown at its own size (inches x dpi, grown by the inline backend's tight bounding box), or shrunk to the
content column when wider; its text shrinks with it. `smallest_text` computes, for each figure, the size its smallest
piece of text renders at, and `check` refuses a figure whose text would fall under `MIN_PX`, naming it, so an
illegible figure fails the build (and `make test`) instead of reaching a reader.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.text import Text

COLUMN_PX = 785  # the book's content column at a 1400-px window (sphinx-book-theme, measured on the built book)
MIN_PX = 9.0  # the smallest text a reader is asked to read, in CSS pixels
DPI = 100  # the book's figure and savefig dpi (plots.set_style)
COLUMN_IN = COLUMN_PX / DPI  # the widest figure shown at its own size, in inches


class IllegibleFigure(ValueError):
    """A figure whose smallest text renders under MIN_PX at the book's width."""


def shown_width_px(fig: plt.Figure) -> float:
    """The figure's width as saved for the page (the tight bounding box the inline backend crops to), in pixels."""
    renderer = fig.canvas.get_renderer()
    return fig.get_tightbbox(renderer).width * fig.dpi


def scale(fig: plt.Figure, column_px: float = COLUMN_PX) -> float:
    """How much the page shrinks the figure to fit the column (1: shown at its own size)."""
    return min(1.0, column_px / shown_width_px(fig))


def smallest_text(fig: plt.Figure, column_px: float = COLUMN_PX) -> tuple[float, str]:
    """The smallest visible text of the figure as rendered in the column, in pixels, and the text itself."""
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    if not texts:
        return float("inf"), ""
    small = min(texts, key=lambda t: t.get_fontsize())
    return small.get_fontsize() * fig.dpi / 72 * scale(fig, column_px), small.get_text()


def check(fig: plt.Figure, column_px: float = COLUMN_PX) -> plt.Figure:
    """`fig` unchanged when its smallest text renders at MIN_PX or more in the column; else IllegibleFigure."""
    px, text = smallest_text(fig, column_px)
    if px < MIN_PX:
        raise IllegibleFigure(
            f"the figure's text {text[:40]!r} renders at {px:.1f} px in the book's {column_px}-px column (at least "
            f"{MIN_PX:g}): the figure is {shown_width_px(fig):.0f} px wide; make it at most {COLUMN_IN:.2f} in wide "
            "or its text larger")
    return fig
