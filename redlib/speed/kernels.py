"""Which CPU kernels run fp32 matrix multiplies: chosen once per process by what the CPU is, with a precision self-check.

torch's bundled MKL takes its AVX2 path on AMD CPUs, so there the matrix multiplies are routed through oneDNN's
AVX-512 kernels (`torch.backends.mkldnn.matmul.fp32_precision`), about 1.7x faster on stage 1. On Intel CPUs MKL
runs its own AVX-512 path and stays: measured on a 2-core Intel Xeon (`make bench BENCH_ARGS=--kernels`), oneDNN's
path ran stage 1 at about a third of MKL's speed. Taking one path on both vendors would not give them the same bits
either (oneDNN blocks its sums by each CPU's cache sizes: the full MNIST page re-run on Intel on oneDNN still
differed from the AMD publication in its last digits), so trained numbers are compared across machines within a
tolerance (`redlib/book/numbers.py`), never bit for bit. The oneDNN flag also lets oneDNN compute in bf16 on CPUs
with AMX units, so oneDNN's instruction set is capped below AMX (`ONEDNN_MAX_CPU_ISA`, set by `configure` before any
product runs, as oneDNN reads it at its first primitive), and the path is taken only after a small product agrees with
float64 as closely as the stock kernels' does; otherwise the stock kernels stay. fp32 stays the arithmetic either
way: only which kernels run it changes, and every process of a run (page kernel and workers) takes the same
decision, so workers stay bit-identical to a serial run. `REDLIB_MATMUL=stock` forces the stock kernels; `fast`
asks for the oneDNN path on any CPU (still behind the self-check).

A page whose stage 1 trains under bf16 autocast (`precision bf16`) wants AMX for its bf16 products (on a 2-core Xeon
a 384 -> 1536 -> 384 block's step ran about 2x faster than in fp32 with AMX, and slower than fp32 without it), so its
processes lift the cap to AMX instead. Its fp32 products keep their kernels: MKL's on Intel (where the cap has no
say), and on a CPU with AMX the oneDNN fp32 path is then refused by the self-check. The cap is set once per page, by
its first step, and the page's workers inherit it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

MODES = ("auto", "stock", "fast")
ONEDNN_ISA_CAP = "AVX512_CORE_BF16"  # below AMX, whose units would compute the oneDNN fp32 path in bf16
AMX_ISA = "AVX512_CORE_AMX"  # the cap of a process that trains stage 1 in bf16: its bf16 products may use AMX
CAP_FOR = "REDLIB_ONEDNN_CAP_FOR"  # the precision a redlib process set the cap for (inherited by its workers)
# the fast path must agree with float64 within this factor of the stock kernels' own error (both are about 5e-7)
TOLERANCE_FACTOR = 4.0


def _cpuinfo(field: str) -> str:
    """The first value of `field` in /proc/cpuinfo ('unknown' elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_vendor() -> str:
    """'AuthenticAMD', 'GenuineIntel', ... from /proc/cpuinfo ('unknown' elsewhere)."""
    return _cpuinfo("vendor_id")


def cpu_model() -> str:
    """The CPU's model name ('Intel(R) Xeon(R) Processor', 'AMD EPYC ...'; 'unknown' elsewhere)."""
    return _cpuinfo("model name")


def _relative_error() -> float:
    """Relative Frobenius error of one fp32 product (256x384 by 384x512) against float64 under the current flags."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 384, generator=gen), torch.randn(384, 512, generator=gen)
    ref = a.double() @ b.double()
    return float((a @ b).double().sub(ref).norm() / ref.norm())


def fp32_accurate(stock_err: float) -> bool:
    """Whether the kernels now selected multiply as close to float64 as the stock kernels (`stock_err`) do."""
    return _relative_error() <= TOLERANCE_FACTOR * max(stock_err, 1e-7)


def set_onednn(on: bool) -> None:
    """Route fp32 matrix multiplies through oneDNN (on) or the stock MKL kernels (off) in this process."""
    torch.backends.mkldnn.matmul.fp32_precision = "bf16" if on else "none"


def mode() -> str:
    """REDLIB_MATMUL, checked: auto (default), stock or fast."""
    chosen = os.environ.get("REDLIB_MATMUL", "auto")
    if chosen not in MODES:
        raise ValueError(f"REDLIB_MATMUL={chosen!r} is not one of: {', '.join(MODES)}")
    return chosen


def environment(precision: str | None = None) -> None:
    """This process's environment defaults, set by `configure` before any product runs (a value the reader set
    wins): oneDNN's instruction set capped below AMX (at AMX for a `precision` of "bf16"; None keeps the precision a
    parent redlib process set the cap for, else fp32), and cuBLAS's deterministic workspace on a GPU (read when cuBLAS
    starts)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    inherited = os.environ.get(CAP_FOR)
    if (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")) and not inherited:
        return  # the reader's own cap
    precision = precision or inherited or "fp32"
    os.environ["ONEDNN_MAX_CPU_ISA"] = AMX_ISA if precision == "bf16" else ONEDNN_ISA_CAP
    os.environ[CAP_FOR] = precision


_RECORD: dict[str, Any] = {}


def configure(precision: str | None = None) -> dict[str, Any]:
    """This process's set-up, once: its environment defaults (`environment`, for stage 1's `precision` where the
    caller knows it), then its fp32 matmul kernels; returns what was chosen and why, for provenance. Every entry point
    calls it (a page's first step, the pipeline's stages, each worker) before it trains; nothing is set when redlib
    is imported. Later calls return the first call's record (oneDNN read its cap at its first product)."""
    if not _RECORD:
        environment(precision)
        _RECORD.update(_choose())
    return _RECORD


def _choose() -> dict[str, Any]:
    """The fp32 matmul kernels this process takes, and why."""
    wanted_mode = mode()
    vendor, isa = cpu_vendor(), torch.backends.cpu.get_cpu_capability()
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "none"
    set_onednn(False)
    stock_err = _relative_error()
    record = {"path": "stock", "vendor": vendor, "isa": isa, "mode": wanted_mode, "onednn_isa_cap": cap,
              "stock_rel_error": stock_err, "cap_for": os.environ.get(CAP_FOR, "the reader's cap")}
    wanted = wanted_mode == "fast" or (wanted_mode == "auto" and vendor == "AuthenticAMD" and isa.startswith("AVX512"))
    if not wanted:
        reason = "forced" if wanted_mode == "stock" else f"{vendor}: MKL runs its own {isa} path"
        record["why"] = f"stock MKL kernels ({reason})"
        return record
    if not torch.backends.mkldnn.is_available():
        record["why"] = "oneDNN is not available in this torch build"
        return record
    set_onednn(True)
    record["fast_rel_error"] = fast_err = _relative_error()
    if not fp32_accurate(stock_err):
        set_onednn(False)  # this CPU computes that path in reduced precision (bf16 units, e.g. AMX): refuse it
        record["why"] = (f"oneDNN path refused: relative error {fast_err:.1e} against float64, stock {stock_err:.1e} "
                         f"(the path lowers precision on this CPU; oneDNN ISA cap {cap})")
        return record
    record["path"] = "onednn"
    record["why"] = f"oneDNN {isa} kernels (relative error {fast_err:.1e}, stock {stock_err:.1e})"
    return record


def describe(record: dict[str, Any]) -> str:
    """One line for a provenance box: which kernels ran the fp32 matrix multiplies (and the bf16 ones' cap)."""
    amx = "; bf16 products may use AMX (stage 1 in bf16)" if record.get("onednn_isa_cap") == AMX_ISA else ""
    return f"fp32 matmul: {record['why']}{amx}"
