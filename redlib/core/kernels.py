"""Which CPU kernels run fp32 matrix multiplies: chosen once per process by capability, with a precision self-check.

torch's bundled MKL takes its AVX2 path on AMD CPUs, so there the matrix multiplies are routed through oneDNN's
AVX-512 kernels (`torch.backends.mkldnn.matmul.fp32_precision`), about 1.7x faster on stage 1. That flag may also
let oneDNN compute in bf16 (it does on CPUs with AMX units), so the path is taken only after a small product
agrees with float64 as closely as the stock kernels' does; otherwise the stock kernels stay. On Intel CPUs MKL
already runs AVX-512 and the stock path is kept. fp32 stays the arithmetic either way: only which kernels run it
changes, and every process of a run (page kernel and workers) takes the same decision, so workers stay
bit-identical to a serial run. `REDLIB_MATMUL=stock` forces the stock kernels (`fast` asks for the oneDNN path
on any CPU, still behind the self-check).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import torch

MODES = ("auto", "stock", "fast")
# the fast path must agree with float64 within this factor of the stock kernels' own error (both are about 5e-7)
TOLERANCE_FACTOR = 4.0


def cpu_vendor() -> str:
    """'AuthenticAMD', 'GenuineIntel', ... from /proc/cpuinfo ('unknown' elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _relative_error() -> float:
    """Relative Frobenius error of one fp32 product (256x384 by 384x512) against float64 under the current flags."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 384, generator=gen), torch.randn(384, 512, generator=gen)
    ref = a.double() @ b.double()
    return float((a @ b).double().sub(ref).norm() / ref.norm())


def _set_onednn(on: bool) -> None:
    torch.backends.mkldnn.matmul.fp32_precision = "bf16" if on else "none"


@cache
def configure() -> dict[str, Any]:
    """Pick this process's fp32 matmul kernels (once) and return what was chosen and why, for provenance."""
    mode = os.environ.get("REDLIB_MATMUL", "auto")
    if mode not in MODES:
        raise ValueError(f"REDLIB_MATMUL={mode!r} is not one of: {', '.join(MODES)}")
    vendor, isa = cpu_vendor(), torch.backends.cpu.get_cpu_capability()
    _set_onednn(False)
    stock_err = _relative_error()
    record = {"path": "stock", "vendor": vendor, "isa": isa, "mode": mode, "stock_rel_error": stock_err}
    wanted = mode == "fast" or (mode == "auto" and vendor == "AuthenticAMD" and isa.startswith("AVX512"))
    if not wanted:
        reason = "forced" if mode == "stock" else f"{vendor}: MKL runs its own {isa} path"
        record["why"] = f"stock MKL kernels ({reason})"
        return record
    if not torch.backends.mkldnn.is_available():
        record["why"] = "oneDNN is not available in this torch build"
        return record
    _set_onednn(True)
    fast_err = _relative_error()
    record["fast_rel_error"] = fast_err
    if fast_err > TOLERANCE_FACTOR * max(stock_err, 1e-7):
        _set_onednn(False)  # this CPU computes that path in reduced precision (bf16 units, e.g. AMX): refuse it
        record["why"] = (f"oneDNN path refused: relative error {fast_err:.1e} against float64, stock {stock_err:.1e} "
                         "(the path lowers precision on this CPU)")
        return record
    record["path"] = "onednn"
    record["why"] = f"oneDNN {isa} kernels (relative error {fast_err:.1e}, stock {stock_err:.1e})"
    return record


def describe(record: dict[str, Any]) -> str:
    """One line for a provenance box: which kernels ran the fp32 matrix multiplies."""
    return f"fp32 matmul: {record['why']}"
