"""Where one stage-1 training step spends its time: the phases (forward, backward, the AdamW step) by wall clock,
and torch.profiler's operators by their own CPU time, grouped into what a reader can act on (the large matrix
products, attention over the question's tokens, layer norms, the activation, copies, and the rest; the
optimiser step's operators are its own group). `make bench` and `python -m redlib bench --kernels` write it as the
`stage1_profile` entry."""

from __future__ import annotations

import time

import torch
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile, record_function

from ..core.train import adamw
from ..speed import kernels
from .micro import stage1_inputs

# operator name (torch.profiler's) -> the group the Speed page names; the first group whose words the name holds
GROUPS = (("large matrix products", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
          ("attention (softmax over the tokens)", ("softmax", "scaled_dot_product", "attention")),
          ("layer norm", ("layer_norm",)),
          ("activation (GELU)", ("gelu",)),
          ("copies, views and reshapes", ("copy_", "clone", "contiguous", "transpose", "view", "reshape", "permute",
                                          "expand", "t", "empty", "zero_", "fill_", "as_strided")))


OPTIMISER = "optimiser (AdamW's element-wise updates)"  # every operator of the optimiser step


def group(name: str) -> str:
    """The group an operator's time is counted in."""
    for label, words in GROUPS:
        if any(name == w or (len(w) > 1 and w in name) for w in words):
            return label
    return "other operators"


def stage1_profile(steps: int = 20, batch: int = 64, tokens: int = 12) -> dict:
    """One stage-1 step (top 2 blocks + head at the pipeline's batch, AdamW as the fit loop's) on this process's
    kernels: each phase's median wall seconds, and the operators' own CPU seconds per group over `steps` steps."""
    record = kernels.configure()
    bb, head, h, mask, y = stage1_inputs(batch, tokens)
    params = [p for p in bb.parameters() if p.requires_grad] + list(head.parameters())
    opt = adamw(params, 1e-4, 0.01)  # the fit loop's AdamW
    phases: dict[str, list[float]] = {"forward": [], "backward": [], "optimiser step": []}

    def step(clock: bool) -> None:
        marks = [time.perf_counter()]
        with record_function("forward"):
            loss = F.cross_entropy(head(bb.forward_top(h, mask)), y)
        marks.append(time.perf_counter())
        with record_function("backward"):
            loss.backward()
        marks.append(time.perf_counter())
        with record_function("optimiser step"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        marks.append(time.perf_counter())
        if clock:
            for name, a, b in zip(phases, marks, marks[1:]):
                phases[name].append(b - a)

    for _ in range(3):
        step(False)
    for _ in range(steps):
        step(True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step(False)
    own: dict[tuple[str, str], list[float]] = {}  # (phase, operator) -> [own CPU us, calls]
    for e in prof.events():
        phase = _phase(e, phases)
        if phase is not None and e.name not in phases and e.self_cpu_time_total > 0:
            row = own.setdefault((phase, e.name), [0.0, 0])
            row[0] += e.self_cpu_time_total
            row[1] += 1
    ops = [{"phase": ph, "operator": name, "group": OPTIMISER if ph == "optimiser step" else group(name),
            "calls per step": n / steps,
            "own CPU ms per step": us / 1e3 / steps} for (ph, name), (us, n) in own.items()]
    return {"matmul": record, "threads": torch.get_num_threads(), "batch": batch, "tokens": tokens, "steps": steps,
            "phases_ms": {k: 1e3 * sorted(v)[len(v) // 2] for k, v in phases.items()},
            "operators": sorted(ops, key=lambda r: -r["own CPU ms per step"])}


def _phase(event, phases) -> str | None:
    """The phase (a `record_function` range of `step`) an operator event ran in, or None outside them."""
    e = event
    while e is not None and e.name not in phases:
        e = e.cpu_parent
    return None if e is None else e.name
