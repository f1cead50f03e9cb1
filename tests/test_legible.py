"""Figures legible at the book's width (issue 63): every figure function of the book, on data shaped like its
pages', renders no text under 9 px in the 1400-px book's column; a figure that would is refused by name; panels that
show one result twice are drawn once."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from redlib.book import diagram, legible, plots, routing_plots  # noqa: E402

RNG = np.random.default_rng(0)
METHODS = ["RED", "softmax MoE", "uniform averaging", "top-1 MoE", "single model", "oracle", "no residual"]
DOMAINS = ["D1 [1,20]", "D2 [21,40]", "D3 [41,60]", "D4 [61,80]", "D5 [81,100]", "off-domain"]


def curves() -> pd.DataFrame:
    return pd.DataFrame([dict(line=line, a=a, model=m, prediction=2 * a + RNG.normal(), truth=2 * a)
                         for line in ("diagonal a = b", "anti-diagonal b = 101 - a")
                         for m in [f"expert E{i}" for i in range(1, 6)] + ["output average", "parameter average"]
                         for a in range(0, 101, 10)])


def heat(rows: int = 7, cols: int = 6) -> pd.DataFrame:
    return pd.DataFrame(RNG.random((rows, cols)), index=[f"model {i}" for i in range(rows)], columns=DOMAINS[:cols])


def hidden_sweep() -> pd.DataFrame:
    """The full profile's routing-noise sweep: five methods, four perturbations, and the MoE under RED's router drawn
    exactly over RED (drawn after it), so RED's legend label grows to "RED (under softmax MoE (RED's router))"."""
    rows = []
    for t in ("Task 1", "Task 2", "MNIST"):
        for p in ("none", "logit noise", "misrouted (random expert)", "misrouted (adjacent expert)", "flattened"):
            for st in (0, 0.25, 0.5, 1):
                for s in range(3):
                    red = 1 - st * RNG.random() / 2
                    rows += [dict(task=t, perturbation=p, strength=st, seed=s, method=m, accuracy=a) for m, a in (
                        ("RED", red), ("softmax MoE", RNG.random()), ("softmax MoE (RED's router)", red),
                        ("uniform averaging", 0.4), ("global head", 0.9))]
    return pd.DataFrame(rows)


FIGURES = {
    "prediction_curves": lambda: plots.prediction_curves(curves(), "A: linear experts", bands=[(1, 20), (21, 40)]),
    "accuracy_heatmap": lambda: plots.accuracy_heatmap(heat(), "B: MLP experts, accuracy (mean over seeds)"),
    "heatmaps_unless_same": lambda: plots.heatmaps_unless_same({"exact base": heat(), "learned base": heat()}, "C"),
    "domain_bars": lambda: plots.domain_bars(pd.DataFrame(
        [dict(domain=d, accuracy=RNG.random(), model=m, seed=s) for d in DOMAINS for s in range(3)
         for m in ["A linear, parameter average", "A linear, output average", "B MLP, parameter average",
                   "B MLP, output average", "C base + mix of all r"]]),
        x="domain", y="accuracy", hue="model", title="Combined models, accuracy per domain (mean and sd over seeds)"),
    "method_bars": lambda: plots.method_bars(pd.DataFrame(
        [dict(method=m, accuracy=RNG.random(), run=r, seed=s) for m in METHODS for r in ("iid", "pairs")
         for s in range(3)]), "Task 1: accuracy per method"),
    "step_lines": lambda: plots.step_lines(pd.DataFrame(
        [dict(steps=k, accuracy=RNG.random(), method=m, split=c, seed=s) for k in (1, 2, 3) for m in METHODS[:4]
         for c in ("iid", "isolated", "mixed") for s in range(3)]), "steps", "method", "Execution by steps", col="split"),
    "confusions": lambda: plots.confusions({"RED": pd.DataFrame(RNG.random((99, 99))),
                                            "softmax MoE": pd.DataFrame(RNG.random((99, 99)))}, "predicted", "true"),
    "red_diagram": diagram.red_diagram,
    "perturbation_curves": lambda: plots.perturbation_curves(pd.DataFrame(
        [dict(task=t, perturbation=p, strength=st, accuracy=RNG.random(), method=m, seed=s)
         for t in ("Task 1", "Task 2", "MNIST") for p in ("none", "logit noise", "misrouted (random expert)")
         for st in (0, 0.5, 1) for m in ("RED", "softmax MoE", "softmax MoE (RED's router)", "global head")
         for s in range(2)]), "Accuracy under routing perturbations"),
    "perturbation_curves, a line under another": lambda: plots.perturbation_curves(hidden_sweep(),
                                                                                 "Accuracy under routing perturbations"),
    "change_heatmaps": lambda: plots.change_heatmaps(pd.DataFrame(
        [dict(task=t, method=m, expert=e, domain=d, change=RNG.random() - 0.5) for t in ("Task 1", "MNIST")
         for m in ("RED", "softmax MoE") for e in range(5) for d in range(5)]), "Accuracy change, one expert removed"),
    "routing_heatmaps": lambda: routing_plots.routing_heatmaps({n: heat(10, 5) for n in ("top-1 share", "weight", "x")}, "R"),
    "token_routes": lambda: routing_plots.token_routes({f"sample {i}": pd.DataFrame(
        {"token": [f"tok{j}" for j in range(23)], "top expert": RNG.integers(0, 4, 23), "weight": RNG.random(23)})
        for i in range(2)}, 4),
    "speedup_vs_bound": lambda: plots.speedup_vs_bound(pd.DataFrame(dict(
        blocks=[4, 8, 28] * 2, batch=[16] * 3 + [64] * 3, speedup=[1.2, 2.0, 4.0, 1.3, 2.1, 4.2], speedup_min=[1.1] * 6,
        speedup_max=[4.5] * 6, bound=[1.3, 2.0, 5.3] * 2)), "Qwen3-0.6B-shaped stacks: cache speed-up vs depth"),
}


@pytest.fixture(autouse=True)
def style():
    plots.set_style()
    yield
    plt.close("all")


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_figure_of_the_book_reads_at_9_px_or_more_in_the_column(name):
    fig = FIGURES[name]()
    px, text = legible.smallest_text(fig)
    assert px >= legible.MIN_PX, f"{name}: {text!r} at {px:.1f} px"


def test_a_figure_too_wide_for_its_text_is_refused_by_name():
    fig, ax = plt.subplots(figsize=(16, 3))
    ax.set_title("tiny", fontsize=7)
    with pytest.raises(legible.IllegibleFigure, match="'tiny' renders at .* px"):
        legible.check(fig)
    small, _ = plt.subplots(figsize=(legible.COLUMN_IN / 2, 2))
    assert legible.scale(small) == 1.0 and legible.check(small) is small  # narrower than the column: shown as is


def test_two_panels_that_show_one_result_are_drawn_once_and_different_ones_twice():
    base = heat()
    same = plots.heatmaps_unless_same({"exact base": base, "learned base": base + 0.01}, "C")
    assert len([a for a in same.axes if a.get_title()]) == 1
    assert "learned base: every cell within 0.010" in same.axes[0].get_title()
    tiny = plots.heatmaps_unless_same({"exact base": base, "learned base": base + 1e-4}, "C").axes[0].get_title()
    assert "every cell within 0.005" in tiny  # a gap that rounds to zero never reads "within 0.00"
    assert "the same in every cell" in plots.heatmaps_unless_same({"a": base, "b": base}, "C").axes[0].get_title()
    apart = plots.heatmaps_unless_same({"exact base": base, "learned base": 1 - base}, "C")
    assert [a.get_title() for a in apart.axes if a.get_title() in ("exact base", "learned base")] == \
        ["exact base", "learned base"]
    rows = [dict(steps=k, accuracy=k / 4, routing=m, programs=p, seed=0) for k in (1, 2, 3) for m in ("RED", "MoE")
            for p in ("true programs", "decomposer's programs")]
    fig = plots.step_lines(pd.DataFrame(rows), "steps", "routing", "Execution", col="programs")
    assert len(fig.axes) == 1 and "true programs and decomposer's programs alike" in fig._suptitle.get_text()


def test_a_long_legend_stacks_into_rows_within_the_panels_instead_of_widening_the_figure():
    fig = plots.perturbation_curves(hidden_sweep(), "Accuracy under routing perturbations")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "RED (under softmax MoE (RED's router))" in labels
    assert legible.scale(fig) == 1.0  # shown at its own size: no wider than the column


@pytest.mark.parametrize("name", ["method_bars", "domain_bars"])
def test_a_legend_below_its_axes_starts_under_the_axis_label_and_tick_labels(name):
    fig = FIGURES[name]()
    r = fig.canvas.get_renderer()
    ax, legend = fig.axes[0], fig.axes[0].get_legend()
    top = legend.get_window_extent(r).y1
    legend.set_visible(False)
    assert top < ax.get_tightbbox(r).y0  # under the tick labels and the axis label


def test_a_line_drawn_under_a_later_one_says_so_in_its_label_and_zero_changes_are_blank():
    df = pd.DataFrame([dict(panel=p, strength=s, method=m, accuracy=s + (0.3 if m == "base" else 0.001 * (m == "b")))
                       for p in ("x", "y") for s in (0.0, 0.5) for m in ("a", "b", "base")])
    assert plots.hidden_under(df, ["panel", "strength"], "method", "accuracy") == {
        "a": "a (under b)", "b": "b", "base": "base"}
    labels = plots.change_labels(pd.DataFrame([[0.0, 0.004, -0.2], [0.0 - 0.006, 0.5, np.nan]]))
    assert labels.tolist() == [["", "", "-0.20"], ["-0.01", "+0.50", ""]]
