"""The RED block diagram the intro opens with: backbone, router, residual experts, their sum and the shared head."""

from __future__ import annotations

import matplotlib.pyplot as plt

from .legible import COLUMN_IN, check

def red_diagram():
    """A block diagram of RED: backbone -> h; router alpha(h); experts Delta h_i; sum; shared classifier W_c."""
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 3.0))
    ax.set_axis_off()
    ax.set(xlim=(0, 10), ylim=(0, 4))

    def box(x, y, w, h, text, colour):
        ax.add_patch(plt.Rectangle((x, y), w, h, facecolor=colour, edgecolor="0.3", linewidth=1.2))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=10)

    def arrow(x0, y0, x1, y1):
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops={"arrowstyle": "->", "color": "0.25", "lw": 1.3})

    box(0.1, 1.5, 1.4, 1.0, "question x", "#eeeeee")
    box(2.0, 1.5, 1.7, 1.0, "backbone\n(top-k trained,\nrest frozen)", "#bbdefb")
    box(4.3, 3.0, 1.7, 0.8, "router α(h)", "#ffe0b2")
    for j, y in enumerate([2.05, 1.25, 0.45]):
        box(4.3, y, 1.7, 0.6, ["expert Δh₁", "expert Δh₂", "… Δh₅"][j], "#c8e6c9")
    box(6.6, 1.5, 1.3, 1.0, "ĥ = h + Σ αᵢ Δhᵢ", "#f8bbd0")
    box(8.4, 1.5, 1.5, 1.0, "softmax(W_c ĥ)", "#d1c4e9")
    arrow(1.5, 2.0, 2.0, 2.0)
    for y in (3.4, 2.35, 1.55, 0.75):
        arrow(3.7, 2.0, 4.3, y)
    for y in (2.35, 1.55, 0.75):
        arrow(6.0, y, 6.6, 2.0)
    arrow(6.0, 3.4, 6.6, 2.4)
    ax.plot([3.3, 3.3, 6.25], [2.5, 2.83, 2.83], color="0.25", lw=1.3)  # the skip path of h
    arrow(6.25, 2.83, 6.6, 2.45)
    ax.text(3.4, 2.87, "h", fontsize=10)
    arrow(7.9, 2.0, 8.4, 2.0)
    ax.text(5.15, 0.1, "each expert trained alone on its range; router trained afterwards", ha="center", fontsize=9,
            style="italic")
    fig.tight_layout()
    return check(fig)
