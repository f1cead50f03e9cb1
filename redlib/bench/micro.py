"""Micro-benchmarks of the levers the pipeline's speed rests on: the fp32 kernels on stage 1, the torch thread
count of the small stages' side-by-side worker processes, and stage-1 runs side by side. Each is `make bench`'s
entry of the same name, also measured alone (`python -m redlib bench --kernels`)."""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from ..configs.task1_addition import Task1Config
from ..models.backbone import Backbone
from ..core.settings import ADAMW, ADAMW_KINDS
from ..core.train import adamw
from ..models.routers import Router
from ..red.types import code_module, expert_module, residual_module
from ..speed import kernels
from ..tasks.arithmetic import N_CLASSES


def spread(times: list[float]) -> dict:
    """Median, min, max and every value of a list of repeated timings (seconds)."""
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "reps": len(times), "seconds": times}


def timed(fn: Callable[[], object], reps: int) -> dict:
    """Run fn `reps` times (after one warm-up): median, min, max seconds and every repetition."""
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return spread(times)


def alternating(a: Callable[[], object], b: Callable[[], object], reps: int) -> tuple[dict, dict]:
    """`timed` of two functions, their repetitions taken in turn (a, b, a, b, ...) after one warm-up each, so that a
    slow stretch of the machine weighs on both alike."""
    a(), b()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(reps):
        for fn, out in ((a, times[0]), (b, times[1])):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return spread(times[0]), spread(times[1])


def stage1_inputs(batch: int = 64, tokens: int = 12) -> tuple[Backbone, nn.Linear, torch.Tensor, torch.Tensor,
                                                               torch.Tensor]:
    """What one stage-1 step takes, seeded: the embedded backbone (top 2 blocks trained), a head, frozen-prefix
    states (batch, tokens, d), their mask and the labels."""
    torch.manual_seed(0)
    bb = Backbone("embedded", 2)
    head = nn.Linear(bb.dim, N_CLASSES)
    h, mask = torch.randn(batch, tokens, bb.dim), torch.ones(batch, tokens, dtype=torch.long)
    y = torch.randint(N_CLASSES, (batch,), generator=torch.Generator().manual_seed(0))
    return bb, head, h, mask, y


def kernel_throughput(reps: int = 5, batch: int = 64, tokens: int = 12) -> dict:
    """Stage 1's fp32 GFLOP/s (top 2 blocks + head, forward and backward, the pipeline's batch) on the kernels this
    process chose, against a large fp32 matrix product on the same threads (the most these cores reach), and both on
    the path not taken (stock or oneDNN) where it computes at fp32 accuracy here."""
    from torch.utils.flop_counter import FlopCounterMode

    record = kernels.configure()
    bb, head, h, mask, y = stage1_inputs(batch, tokens)

    def step() -> None:
        F.cross_entropy(head(bb.forward_top(h, mask)), y).backward()

    with FlopCounterMode(display=False) as counter:
        step()
    flops = counter.get_total_flops()
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)

    def measure() -> tuple[dict, dict]:
        for _ in range(3):
            step()
        for _ in range(2):
            a @ b
        return timed(lambda: [step() for _ in range(10)], reps), timed(lambda: [a @ b for _ in range(5)], reps)

    t, g = measure()
    stage1 = 10 * flops / t["median"] / 1e9
    gemm = 5 * 2 * 2048**3 / g["median"] / 1e9
    out = {"matmul": record, "threads": torch.get_num_threads(), "batch": batch, "tokens": tokens,
           "stage1_flops_per_step": flops, "stage1_gflops": stage1, "gemm_2048_gflops": gemm,
           "stage1_share_of_gemm": stage1 / gemm, "stage1_step": t, "gemm": g}
    other = "stock" if record["path"] == "onednn" else "onednn"
    if other == "stock" or torch.backends.mkldnn.is_available():  # the path not taken, same steps, same process
        kernels.set_onednn(other == "onednn")
        try:
            if other == "onednn" and not kernels.fp32_accurate(record["stock_rel_error"]):
                return out  # it computes in reduced precision here: no speed to set beside the chosen path's
            ts, gs = measure()
        finally:
            kernels.set_onednn(record["path"] == "onednn")
        out["other_path"] = {"path": other, "stage1_gflops": 10 * flops / ts["median"] / 1e9,
                             "gemm_2048_gflops": 5 * 2 * 2048**3 / gs["median"] / 1e9, "stage1_step": ts, "gemm": gs,
                             "chosen_stage1_speedup": ts["median"] / t["median"]}
    return out


def _steps_per_second(loss: Callable[[], torch.Tensor], params: list, warmup: int, steps: int,
                      kind: str = ADAMW) -> float:
    """Training steps per second (the loss's backward and the pipeline's AdamW step) after `warmup` untimed steps."""
    opt = adamw(params, 1e-5, 0.01, kind)

    def step() -> None:
        loss().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - t)


def _small_stage_steps(threads: int, steps: int, kind: str = ADAMW) -> float:
    """In a worker: training steps per second of a RED residual on features (batch 16, through a frozen head) on
    `threads` torch threads."""
    torch.set_num_threads(threads)
    kernels.configure()
    torch.manual_seed(0)
    residual, head = residual_module(Task1Config(), 384), nn.Linear(384, N_CLASSES).requires_grad_(False)
    h, y = torch.randn(16, 384), torch.randint(N_CLASSES, (16,))
    return _steps_per_second(lambda: F.cross_entropy(head(h + residual(h)), y), list(residual.parameters()), 50, steps,
                             kind)


def _stage1_steps(threads: int, steps: int, batch: int = 64, tokens: int = 12, kind: str = ADAMW) -> float:
    """In a worker: stage-1 training steps per second (top 2 blocks + head, at the pipeline's batch) on `threads`
    torch threads."""
    torch.set_num_threads(threads)
    kernels.configure()
    bb, head, h, mask, y = stage1_inputs(batch, tokens)
    params = [p for p in bb.parameters() if p.requires_grad] + list(head.parameters())
    return _steps_per_second(lambda: F.cross_entropy(head(bb.forward_top(h, mask)), y), params, 5, steps, kind)


def _side_by_side(fn: Callable[[int, int], float], processes: int, threads: int, steps: int, reps: int) -> dict:
    """Steps per second of `processes` spawned workers running fn(threads, steps) at once, summed; spread over reps."""
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"  # as speed/parallel.py sets it for the workers it spawns
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as ex:
        totals = [sum(f.result() for f in [ex.submit(fn, threads, steps) for _ in range(processes)])
                  for _ in range(reps)]
    return spread(totals)


def stage_threads(reps: int = 3, steps: int = 2000, workers: int = 2) -> dict:
    """Small-stage steps per second of `workers` processes training side by side (as a page's workers do, their
    OpenMP threads waiting passively), with 2 and with 1 torch thread each: the lever behind STAGE_THREADS."""
    rows = [{"threads": t, **_side_by_side(_small_stage_steps, workers, t, steps, reps)} for t in (2, 1)]
    return {"workers": workers, "steps": steps, "per_thread_count": rows,
            "speedup_1_over_2": rows[1]["median"] / rows[0]["median"]}


def stage1_processes(reps: int = 3, steps: int = 40) -> dict:
    """Stage-1 steps per second of one process on both threads (one run after another) against two processes side
    by side (two runs at once, e.g. two seeds), on one thread each and on both threads each (the page's count: the
    bits of a serial run): the side-by-side lever."""
    rows = [{"processes": n, "threads each": t, **_side_by_side(_stage1_steps, n, t, steps, reps)}
            for n, t in ((1, 2), (2, 1), (2, 2))]
    return {"steps": steps, "per_layout": rows, "speedup_side_by_side": rows[1]["median"] / rows[0]["median"],
            "speedup_side_by_side_page_threads": rows[2]["median"] / rows[0]["median"]}


def text_padding(reps: int = 3, n: int = 2048, batch: int = 16, steps: int = 40) -> dict:
    """Stage 1 on Task 2's texts, with each batch padded to the longest text of all (as before) and cut to its own
    longest (`TextEncoder.forward`): seconds of `steps` training steps at the pipeline's micro-batch and of one
    validation pass over `n` texts (id order padded, shortest first cut), and the mean tokens per row each ran on."""
    import tempfile

    from ..core.store import Store
    from ..red.encoders import TextEncoder
    from ..tasks.mixed import Task2Spec
    from ..tasks.mixed_data import make_task2

    kernels.configure()
    texts = make_task2(Task2Spec(n_train=n, n_val=8, n_test=8))["train"]["text"].tolist()
    torch.manual_seed(0)
    bb = Backbone("embedded", 2)
    head = nn.Linear(bb.dim, N_CLASSES)
    y = torch.randint(N_CLASSES, (n,), generator=torch.Generator().manual_seed(0))
    picks = torch.randperm(n, generator=torch.Generator().manual_seed(1))[: steps * batch].view(steps, batch)
    with tempfile.TemporaryDirectory() as tmp:
        enc = TextEncoder(bb, texts, Store(tmp), "bench")
        padded = lambda idx: bb.forward_top(enc.prefix[idx], enc.mask[idx])  # noqa: E731 - the old path
        out = {}
        for name, encode, order in (("padded", padded, torch.arange(n)), ("cut", enc, enc.length_order(torch.arange(n)))):
            def train() -> None:
                for idx in picks:
                    F.cross_entropy(head(encode(idx)), y[idx]).backward()

            def validate() -> None:
                with torch.no_grad():
                    for s in range(0, n, 1024):
                        encode(order[s:s + 1024])

            width = [enc.mask.shape[1] if name == "padded" else int(enc.lengths[order[s:s + 1024]].max())
                     for s in range(0, n, 1024)]
            out[name] = {"train": timed(train, reps), "validate": timed(validate, reps),
                         "validation tokens per row": sum(width) / len(width)}
    return {"texts": n, "batch": batch, "steps": steps, "mean tokens": float(enc.lengths.float().mean()),
            "padded to": enc.mask.shape[1], **out,
            "train_speedup": out["padded"]["train"]["median"] / out["cut"]["train"]["median"],
            "validate_speedup": out["padded"]["validate"]["median"] / out["cut"]["validate"]["median"]}


def optimizer_kinds(reps: int = 3, small_steps: int = 2000, stage1_steps: int = 20) -> dict:
    """AdamW fused against foreach, in this process: stage 1's steps per second (the page's threads) and a small
    stage's (one thread, as the workers train them), and how far apart the two leave stage 1's parameters after 10
    steps on the same gradients (relative to the parameters' size): both are AdamW's fp32 update, rounded apart."""
    threads = torch.get_num_threads()
    out: dict = {"threads": threads, "chosen": ADAMW, "kinds": {}}
    for kind in ADAMW_KINDS:
        s1 = spread([_stage1_steps(threads, stage1_steps, kind=kind) for _ in range(reps)])
        small = spread([_small_stage_steps(1, small_steps, kind) for _ in range(reps)])
        out["kinds"][kind] = {"stage1_steps_per_second": s1, "small_steps_per_second": small}
    torch.set_num_threads(threads)
    median = lambda kind, what: out["kinds"][kind][what]["median"]  # noqa: E731
    out["stage1_speedup"] = median("fused", "stage1_steps_per_second") / median("foreach", "stage1_steps_per_second")
    out["small_speedup"] = median("fused", "small_steps_per_second") / median("foreach", "small_steps_per_second")
    out["relative_difference_after_10_steps"] = _optimizer_gap(10)
    return out


def _optimizer_gap(steps: int) -> float:
    """max |fused - foreach| / max |parameter| over stage 1's parameters after `steps` AdamW steps on the same
    gradients from the same start."""
    bb, head, *_ = stage1_inputs()
    trained = [p for p in bb.parameters() if p.requires_grad] + list(head.parameters())
    start = [p.detach().clone() for p in trained]
    grads = [torch.randn_like(p) for p in start]
    ends = []
    for kind in ADAMW_KINDS:
        params = [nn.Parameter(p.clone()) for p in start]
        opt = adamw(params, 1e-4, 0.01, kind)
        for _ in range(steps):
            for p, g in zip(params, grads):
                p.grad = g.clone()
            opt.step()
        ends.append([p.detach() for p in params])
    gap = max(float((a - b).abs().max()) for a, b in zip(*ends))
    return gap / max(float(p.abs().max()) for p in start)


def stacked_stages(reps: int = 5, n: int = 1000, epochs: int = 2) -> dict:
    """The small stages of one seed trained as one stack (`core/stacked.py`) against separate fits, per kind (a
    classifier expert at the pipeline's width and as the paper's linear head, a RED residual, a code expert), at
    the pipeline's micro-batch and the paper's (16, accumulated to 64), on one thread as the workers train them:
    expert-steps per second of each (one expert-step: one expert's batch, forward and backward; medians of
    repetitions taken in turn), and the speed-up; beside them, the milliseconds one expert-step's products take at
    this thread's GEMM rate (`step_flops`), and for the router and gates (one fit each, not stacked) the same."""
    from ..core.stacked import fit_stacked
    from ..core.train import TrainConfig, fit
    from ..configs.task1_addition import Task1Config

    cfg = Task1Config()
    d, C, K = 384, N_CLASSES, 5
    torch.set_num_threads(1)
    kernels.configure()
    head = nn.Linear(d, C).requires_grad_(False)
    kinds = {f"expert (hidden {cfg.expert_hidden})": (lambda: expert_module(cfg, d, C), lambda m, h: m(h)),
             "expert (linear, the paper's)": (lambda: nn.Sequential(nn.Linear(d, C)), lambda m, h: m(h)),
             "residual": (lambda: residual_module(cfg, d), lambda m, h: head(h + m(h))),
             "code": (lambda: code_module(cfg, d, C), lambda m, h: head(h) + cfg.code_scale * m(h))}
    gen = torch.Generator().manual_seed(0)
    train = [(torch.randn(n, d, generator=gen), torch.randint(C, (n,), generator=gen)) for _ in range(K)]
    val = [(torch.randn(n // 8, d, generator=gen), torch.randint(C, (n // 8,), generator=gen)) for _ in range(K)]
    rows = []
    for batch in sorted({cfg.batch_size, 16}, reverse=True):
        tcs = [TrainConfig(lr=1e-4, batch_size=batch, virtual_batch=max(batch, 64), max_epochs=epochs, patience=epochs,
                           seed=k) for k in range(K)]
        expert_steps = K * epochs * -(-n // batch)
        for kind, (make, logits) in kinds.items():
            loss = lambda m, b, logits=logits: F.cross_entropy(logits(m, b[0]), b[1])  # noqa: E731
            separate, stacked = alternating(
                lambda: [fit(make(), loss, tr, va, tc) for tr, va, tc in zip(train, val, tcs)],
                lambda: fit_stacked([make() for _ in range(K)], logits, train, val, tcs), reps)
            rows.append({"kind": kind, "batch": batch, "virtual batch": tcs[0].virtual_batch,
                         "separate expert-steps per second": expert_steps / separate["median"],
                         "stacked expert-steps per second": expert_steps / stacked["median"],
                         "speedup": separate["median"] / stacked["median"], "separate": separate, "stacked": stacked})
    rate = gemm_rate()
    flops = {kind: step_flops(make(), batch=1, head=(d, C) if kind in ("residual", "code") else None,
                              head_grad=kind == "residual") for kind, (make, _) in kinds.items()}
    for r in rows:
        r["arithmetic ms"] = 1e3 * flops[r["kind"]] * r["batch"] / rate
        r["stacked ms per expert-step"] = 1e3 / r["stacked expert-steps per second"]
        r["times arithmetic"] = r["stacked ms per expert-step"] / r["arithmetic ms"]
    router = Router(d, K, cfg.router_hidden)
    x, y = torch.randn(n, d, generator=gen), torch.randint(K, (n,), generator=gen)
    tc = TrainConfig(lr=1e-4, batch_size=cfg.batch_size, virtual_batch=64, max_epochs=epochs, patience=epochs, seed=0)
    fit_router = timed(lambda: fit(router, lambda m, b: F.cross_entropy(m.logits(b[0]), b[1]), (x, y),
                                   (x[: n // 8], y[: n // 8]), tc), reps)
    ms = 1e3 * fit_router["median"] / (epochs * -(-n // tc.batch_size))
    single = [{"kind": f"router or gate (hidden {cfg.router_hidden}, one fit)", "batch": tc.batch_size,
               "ms per step": ms, "arithmetic ms": 1e3 * step_flops(router, tc.batch_size) / rate,
               "fit": fit_router}]
    single[0]["times arithmetic"] = ms / single[0]["arithmetic ms"]
    return {"experts": K, "samples per expert": n, "epochs": epochs, "threads": 1, "d": d, "classes": C,
            "gemm_gflops_one_thread": rate / 1e9, "per_kind": rows, "single": single}


def gemm_rate(size: int = 1024, reps: int = 5) -> float:
    """This thread's fp32 GEMM rate (FLOP/s) on size x size products, the median of `reps`."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    return 2 * size**3 / timed(lambda: a @ b, reps)["median"]


def step_flops(model: nn.Module, batch: int, head: tuple[int, int] | None = None, head_grad: bool = False) -> float:
    """The products of one training step of `model` on `batch` rows: per linear layer 2 B in out forward, as much
    for its weight's gradient, and as much again for its input's gradient except the first layer's (the features
    need none); for a frozen `head` (in, out) the stage's answer goes through, its forward, and its input's gradient
    where the loss flows back through it (`head_grad`)."""
    layers = [m.weight.shape for m in model.modules() if isinstance(m, nn.Linear)]
    total = sum((4 if k == 0 else 6) * batch * shape[0] * shape[1] for k, shape in enumerate(layers))
    if head is not None:
        total += (4 if head_grad else 2) * batch * head[0] * head[1]
    return float(total)
