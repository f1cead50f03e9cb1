"""The speed levers the bench measures, as the Speed page shows them: one table per lever, its caption, and the
phrase the page's prose pastes in (glued), each built from its bench entry alone.

A lever not measured yet (its entry absent from bench.json) is a `Lever` with no table and a line saying which
command measures it, so the page says so instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

KERNELS_COMMAND = "python -m redlib bench --kernels"


@dataclass(frozen=True)
class Lever:
    """One measured lever: its bench key (`name`, the file its table is kept as), the table the page shows (`data`,
    None when not measured), the table's caption (or the line saying it is not measured), and the phrase glued into
    the page's prose under `glue` (None: the lever glues nothing)."""

    name: str
    data: pd.DataFrame | None
    caption: str
    phrase: str
    glue: str | None = None

    @property
    def measured(self) -> bool:
        return self.data is not None


def span(t: dict) -> str:
    """'median (min-max)' of a timing entry, in seconds."""
    return f"{t['median']:.3f} ({t['min']:.3f}-{t['max']:.3f})"


def when(entry: dict) -> str:
    """The commit and day a micro-benchmark was measured at."""
    return f"{entry['git_commit'][:7]}, {entry['measured_at'][:10]}"


def steps_table(entry: dict, rows: str, layout: dict[str, str], what: str, fmt: str = ",.1f",
                **fixed: Any) -> pd.DataFrame:
    """A micro-benchmark's steps per second, one row per layout (`layout` maps its keys to column names; `fixed`
    adds columns that hold one value), with the commit and day it was measured at."""
    return pd.DataFrame([{**{name: r[key] for key, name in layout.items()}, **fixed,
                          what: f"{r['median']:{fmt}} ({r['min']:{fmt}}-{r['max']:{fmt}})", "measured at": when(entry)}
                         for r in entry[rows]])


def prefix_cache(bench: dict) -> pd.DataFrame:
    """Naive vs cached epoch per backbone and batch, speed-up with its range over repetitions, and the bound."""
    pc = bench["prefix_cache"]
    cache = pd.DataFrame([{
        "backbone": "embedded (MiniLM)" if r["backbone"] == "embedded" else "Qwen3-shaped", "blocks L": r["blocks"],
        "batch": r["batch"], "naive epoch s": r["naive_epoch"]["median"], "cached epoch s": r["cached_epoch"]["median"],
        "prefix once s": r["prefix_seconds_once"], "speedup": r["speedup"],
        # the range pairs the extreme repetitions: slowest naive over fastest cached, and the reverse
        "speedup_min": r["naive_epoch"]["min"] / r["cached_epoch"]["max"],
        "speedup_max": r["naive_epoch"]["max"] / r["cached_epoch"]["min"], "bound": r["bound"]}
        for r in [*pc["embedded"], *pc["qwen_shaped"]]])
    cache["share of bound"] = (cache["speedup"] / cache["bound"]).map("{:.0%}".format)
    return cache


def prefix_cache_shown(cache: pd.DataFrame) -> pd.DataFrame:
    """The prefix-cache table as the page shows it: the speed-up with its range in one column."""
    shown = cache.assign(**{"speed-up (range)": [f"{a:.2f} ({lo:.2f}-{hi:.2f})" for a, lo, hi in
                                                 zip(cache["speedup"], cache["speedup_min"], cache["speedup_max"])]})
    return shown[["backbone", "blocks L", "batch", "naive epoch s", "cached epoch s", "prefix once s",
                  "speed-up (range)", "bound", "share of bound"]]


def profile_table(p: dict) -> pd.DataFrame:
    """Stage 1's profile as the Speed page shows it: each group's own CPU ms per step in each phase, and its share."""
    ops = pd.DataFrame(p["operators"])
    t = ops.pivot_table(index="group", columns="phase", values="own CPU ms per step", aggfunc="sum", fill_value=0.0)
    t = t[[ph for ph in p["phases_ms"] if ph in t.columns]]
    total = t.sum(axis=1)
    return t.assign(**{"all phases": total, "share": (total / total.sum()).map("{:.0%}".format)}).sort_values(
        "all phases", ascending=False).round(1).reset_index()


def _prefix(bench: dict) -> tuple[pd.DataFrame, str, str]:
    pc = bench["prefix_cache"]
    first = pc["embedded"][0]
    shape = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in pc["qwen_shape"].items())
    return (prefix_cache_shown(prefix_cache(bench)),
            f"Frozen-prefix cache against naive training: {first['samples']} questions, top k = {first['k']} blocks "
            f"trained, median of {first['naive_epoch']['reps']} epochs after a warm-up; Qwen3-shaped stacks at a "
            f"quarter of its width ({shape}), random weights", "")


def _kernels(k: dict) -> tuple[pd.DataFrame, str, str]:
    other = k.get("other_path", {})
    return (pd.DataFrame([{
        "kernel path": k["matmul"]["path"], "why": k["matmul"]["why"], "threads": k["threads"],
        "CPU": k["matmul"]["vendor"], "stage 1 GFLOP/s": k["stage1_gflops"],
        "2048² product GFLOP/s": k["gemm_2048_gflops"], "stage 1 share": f"{k['stage1_share_of_gemm']:.0%}",
        "path not taken": other.get("path", "-"), "stage 1 on it, GFLOP/s": other.get("stage1_gflops"),
        "measured at": when(k)}]),
        "fp32 matmul kernels and stage 1's throughput", "")


def _profile(p: dict) -> tuple[pd.DataFrame, str, str]:
    return (profile_table(p),
            "One stage-1 step, own CPU ms per operator group and phase (torch.profiler; wall ms without it: "
            + ", ".join(f"{k} {v:.0f}" for k, v in p["phases_ms"].items()) + f"; {p['matmul']['path']} kernels)", "")


def _optimizer(o: dict) -> tuple[pd.DataFrame, str, str]:
    return (pd.DataFrame([{
        "AdamW": kind + (" (used)" if kind == o["chosen"] else ""),
        "stage 1 steps/s": round(v["stage1_steps_per_second"]["median"], 2),
        "small-stage steps/s (1 thread)": round(v["small_steps_per_second"]["median"])}
        for kind, v in o["kinds"].items()]),
        f"AdamW fused against foreach: stage 1 {o['stage1_speedup']:.2f}x, a small stage {o['small_speedup']:.2f}x; "
        f"after 10 steps their parameters differ by {o['relative_difference_after_10_steps']:.1e} of the largest", "")


def _threads(t: dict) -> tuple[pd.DataFrame, str, str]:
    return (steps_table(t, "per_thread_count", {"threads": "torch threads per worker"}, "steps/s, all workers",
                        ",.0f", workers=t["workers"]),
            "Small-stage training steps per second by thread count", f"{t['speedup_1_over_2']:.2f}x")


def _stacked(t: dict) -> tuple[pd.DataFrame, str, str]:
    """Stacked against separate fits per kind, each step's milliseconds beside its products' at this thread's GEMM
    rate where measured (and the router's one fit, which no stack serves)."""
    arith = lambda r, ms: {"ms per step": round(ms, 3), "products alone, ms": round(r["arithmetic ms"], 3),  # noqa: E731
                           "x products": round(r["times arithmetic"], 1)} if "arithmetic ms" in r else {}
    rows = [{"kind": r["kind"], "batch (virtual)": f"{r['batch']} ({r['virtual batch']})",
             "separate fits, expert-steps/s": round(r["separate expert-steps per second"]),
             "stacked, expert-steps/s": round(r["stacked expert-steps per second"]), "speed-up": round(r["speedup"], 2),
             **arith(r, 1e3 / r["stacked expert-steps per second"])} for r in t["per_kind"]]
    rows += [{"kind": r["kind"], "batch (virtual)": f"{r['batch']} (64)", "separate fits, expert-steps/s":
              round(1e3 / r["ms per step"]), **arith(r, r["ms per step"])} for r in t.get("single", [])]
    return (pd.DataFrame(rows).fillna("–"),
        f"Stacked experts: {t['experts']} experts of {t['samples per expert']} samples, {t['epochs']} epochs each",
        f"{min(r['speedup'] for r in t['per_kind']):.2f}x to {max(r['speedup'] for r in t['per_kind']):.2f}x (over "
        f"{len({r['kind'] for r in t['per_kind']})} kinds and {len({r['batch'] for r in t['per_kind']})} batch sizes)")


def _padding(t: dict) -> tuple[pd.DataFrame, str, str]:
    what = {"train": f"{t['steps']} training steps of {t['batch']} texts", "validate": f"validation over {t['texts']} texts"}
    return (pd.DataFrame([{
        "pass": what[k], "padded to the longest of all, s": span(t["padded"][k]),
        "cut to the batch's longest, s": span(t["cut"][k]), "speed-up": round(t[f"{k}_speedup"], 2)}
        for k in ("train", "validate")]),
        f"Stage 1 on Task 2's texts (mean {t['mean tokens']:.1f} tokens, padded to {t['padded to']})",
        f"{t['train_speedup']:.2f}x in training and {t['validate_speedup']:.2f}x in validation")


def _side_by_side(t: dict) -> tuple[pd.DataFrame, str, str]:
    page = (f"{t['speedup_side_by_side_page_threads']:.2f}x on two threads each (what Task 1 and Task 2 run) and "
            if "speedup_side_by_side_page_threads" in t else "")
    return (steps_table(t, "per_layout", {"processes": "processes", "threads each": "torch threads each"},
                        "steps/s, all processes"),
            "Stage-1 training steps per second, one run at a time or two side by side",
            page + f"{t['speedup_side_by_side']:.2f}x on one thread each")


def _features(bench: dict) -> tuple[pd.DataFrame, str, str]:
    fc, tp = bench["features_cache"], bench["throughput"]
    rows = [{"method": k, "queries per second": round(v["queries_per_second"]), "seconds per batch": span(v)}
            for k, v in tp["methods"].items()]
    rows.append({"method": "backbone forward (embedded)", "queries per second": round(tp["backbone"]["queries_per_second"]),
                 "seconds per batch": span(tp["backbone"])})
    return (pd.DataFrame(rows),
            f"Inference throughput per method; RED's head (router, five residuals, classifier) costs "
            f"{tp['red_extra_cost_vs_backbone']:.2%} of a backbone forward per query",
            f"{fc['speedup']:.0f}x (one router epoch over {fc['samples']} questions: {span(fc['cached_epoch'])} s "
            f"against {span(fc['recompute_epoch'])} s)")


# key -> (what is measured, the entries it needs, how to build it from the bench, its glue name)
BUILDERS: dict[str, tuple[str, tuple[str, ...], Callable[[dict], tuple[pd.DataFrame, str, str]], str | None]] = {
    "prefix_cache": ("the frozen-prefix cache", ("prefix_cache",), _prefix, None),
    "stacked": ("stacked small stages", ("stacked",), lambda b: _stacked(b["stacked"]), "sp_stacked"),
    "stage_threads": ("the small stages' thread counts", ("stage_threads",), lambda b: _threads(b["stage_threads"]),
                      "sp_stage_threads"),
    "text_padding": ("cutting the padding", ("text_padding",), lambda b: _padding(b["text_padding"]), "sp_padding"),
    "stage1_processes": ("stage 1 side by side", ("stage1_processes",),
                         lambda b: _side_by_side(b["stage1_processes"]), "sp_stage1_side"),
    "throughput": ("cached features and throughput", ("features_cache", "throughput"), _features, "sp_features"),
    "optimizer": ("the AdamW kinds", ("optimizer",), lambda b: _optimizer(b["optimizer"]), None),
    "kernels": ("the fp32 kernels", ("kernels",), lambda b: _kernels(b["kernels"]), None),
    "stage1_profile": ("stage 1's profile", ("stage1_profile",), lambda b: _profile(b["stage1_profile"]), None),
}


def lever(bench: dict | None, key: str) -> Lever:
    """The lever `key` of BUILDERS as measured in `bench`, or, where the bench lacks it, a line saying so."""
    what, needs, build, glue = BUILDERS[key]
    if not bench or any(n not in bench for n in needs):
        return Lever(key, None, f"{what[0].upper()}{what[1:]}: not measured yet (`{KERNELS_COMMAND}`).",
                     "not measured", glue)
    table, caption, phrase = build(bench)
    return Lever(key, table, caption, phrase, glue)


def levers(bench: dict | None) -> dict[str, Lever]:
    """Every lever, by key, in the order the page shows them."""
    return {key: lever(bench, key) for key in BUILDERS}
