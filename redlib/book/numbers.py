"""A run's trained numbers against a reference run's, within a stated tolerance (what `make test` checks of them).

fp32 kernels differ between CPUs (vendor, AVX-512 or AVX2, MKL or oneDNN) in the order they sum, so a trained
number lands a few units away in its last digits, and on the smoke profile's tiny test sets that can move an
accuracy by a test item or two. nbval therefore compares the notebooks' text with every decimal number masked
(`tests/nbval_sanitize.cfg`), and this module compares the numbers themselves, read from the result files:

- every claim's measured `value` and `per_seed` (and those of its extensions), number by number;
- every metric column of every result table (a column named like an accuracy or an F1), row
  by row, rows matched on the table's label columns;

each within `TOLERANCE` (absolute for the shares in [0, 1] that most metrics are; for a number beyond 1, such as a
ratio, that share of its size), or `SUBSET_TOLERANCE` for a number measured
on a part of the test set (one domain or one range: a table with a domain or range column, a claim whose value is
a list), where the smoke profile has about a hundred inputs and one kernel path's model gets a few more of them
right than another's. Sized on the smoke profile under three kernel paths on one Intel Xeon (oneDNN AVX-512, MKL
AVX-512, MKL and oneDNN on AVX2): the largest difference from the reference was 0.02 on a whole-test-set number
and 0.03 on a per-domain one. A ratio moves with its size: on an AMD EPYC under `REDLIB_MATMUL=stock` (MKL on AMD),
routing's smoke ratio near 2.8 moved by about 2% of it. Labels, row sets, booleans and words must match exactly.
What a run measures of the machine (seconds, memory) is not compared.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

# the largest absolute difference allowed per number: above what the kernel paths gave (module docstring) and
# small enough that a real change of 0.05 fails
TOLERANCE = 0.03
SUBSET_TOLERANCE = 0.06  # a number on one domain or range of a smoke run (about 100 inputs: 6 of them)
SUBSET_LABELS = ("domain", "range", "distinct inputs")  # columns that mark a table of per-domain or per-range numbers
SUBSET_METRICS = ("boundary",)  # metric columns measured on a few test inputs (Task 1's boundary sums: ~19 in smoke)
# claims that measure this machine (time, memory), not a trained model: never compared
MACHINE_CLAIMS = ("eff.train_time", "eff.peak_memory")
METRIC = re.compile(r"accuracy|f1", re.I)
# tables of seconds and memory: what a run took, not what it found
TIMING_TABLES = ("stage_seconds.csv", "stage_times.csv", "wall_times.csv", "cold_peaks.csv", "paper_budget_seconds.csv")
COMPARED_FIELDS = ("value", "per_seed")


def allowed(a: float, b: float, tol: float) -> float:
    """How far two numbers may lie apart: tol, or tol of their size where either lies beyond 1 (a ratio)."""
    return tol * max(1.0, abs(a), abs(b))


def _apart(a: float, b: float, tol: float) -> bool:
    return math.isnan(a) != math.isnan(b) or abs(a - b) > allowed(a, b, tol)


def _leaves(a: Any, b: Any, where: str, tol: float, out: list[str]) -> None:
    """Walk two JSON values side by side: numbers within tol, everything else equal; differences appended to out."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str):
        if a != b:
            out.append(f"{where}: {a!r} in the reference, {b!r} here")
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if _apart(a, b, tol):
            out.append(f"{where}: {a:.4g} in the reference, {b:.4g} here (more than {allowed(a, b, tol):.3g} apart)")
    elif isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append(f"{where}: keys {sorted(a)} in the reference, {sorted(b)} here")
        for k in a.keys() & b.keys():
            _leaves(a[k], b[k], f"{where}.{k}", tol, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} entries in the reference, {len(b)} here")
        for i, (x, y) in enumerate(zip(a, b)):
            _leaves(x, y, f"{where}[{i}]", tol, out)
    else:
        out.append(f"{where}: {a!r} in the reference, {b!r} here")


def _claim_tolerance(measured: dict[str, Any], tol: float) -> float:
    """A claim whose value is a list measures one number per domain or range: the subset tolerance."""
    return max(tol, SUBSET_TOLERANCE) if isinstance(measured.get("value"), list) else tol


def compare_claims(ref: dict[str, Any], new: dict[str, Any], tol: float = TOLERANCE) -> list[str]:
    """Differences between two pages' claims (claims.json's "claims"): measured values beyond tol, claims missing."""
    out: list[str] = []
    only = sorted((set(ref) ^ set(new)) - set(MACHINE_CLAIMS))  # those are measured only where others' results are
    if only:
        out.append(f"claims {only} are in only one of the two runs")
    for cid in sorted(ref.keys() & new.keys()):
        if cid in MACHINE_CLAIMS:
            continue
        a, b = ref[cid], new[cid]
        for field in COMPARED_FIELDS:
            _leaves(a.get(field), b.get(field), f"{cid}.{field}", _claim_tolerance(a, tol), out)
        ext_a, ext_b = a.get("extensions", {}), b.get("extensions", {})
        if set(ext_a) != set(ext_b):
            out.append(f"{cid}: extensions {sorted(set(ext_a) ^ set(ext_b))} are in only one of the two runs")
        for name in ext_a.keys() & ext_b.keys():
            for field in COMPARED_FIELDS:
                _leaves(ext_a[name].get(field), ext_b[name].get(field), f"{cid} [{name}].{field}",
                        _claim_tolerance(ext_a[name], tol), out)
    return out


def _labels(df: pd.DataFrame) -> list[str]:
    """The columns that name a row: text columns and the seed (not an unnamed index, not a measured number)."""
    return [c for c in df.columns if not str(c).startswith("Unnamed")
            and (c == "seed" or not (pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c])))]


def metric_columns(df: pd.DataFrame) -> list[str]:
    """The columns of a table that hold trained metrics (accuracies, F1s; confidence bounds follow from them)."""
    return [c for c in df.columns if METRIC.search(str(c)) and pd.api.types.is_numeric_dtype(df[c])]


def compare_table(ref: pd.DataFrame, new: pd.DataFrame, name: str, tol: float = TOLERANCE) -> list[str]:
    """Differences between two result tables: columns, row labels, and metric columns beyond tol (or beyond the
    subset tolerance in a table of per-domain or per-range numbers)."""
    if list(ref.columns) != list(new.columns):
        return [f"{name}: columns {list(ref.columns)} in the reference, {list(new.columns)} here"]
    labels = _labels(ref)
    if len(ref) != len(new) or not ref[labels].reset_index(drop=True).equals(new[labels].reset_index(drop=True)):
        return [f"{name}: rows ({', '.join(labels)}) differ from the reference's ({len(ref)} rows there, {len(new)} here)"]
    tol = max(tol, SUBSET_TOLERANCE) if any(c in ref.columns for c in SUBSET_LABELS) else tol
    out = []
    for col in metric_columns(ref):
        a, b = ref[col].to_numpy(float), new[col].to_numpy(float)
        tol_c = max(tol, SUBSET_TOLERANCE) if any(w in col for w in SUBSET_METRICS) else tol
        for i in range(len(a)):
            if _apart(a[i], b[i], tol_c):
                row = ", ".join(str(ref[c].iloc[i]) for c in labels)
                out.append(f"{name} [{row}] {col}: {a[i]:.4g} in the reference, {b[i]:.4g} here "
                           f"(more than {allowed(a[i], b[i], tol_c):.3g} apart)")
    return out


def _read(path: Path) -> pd.DataFrame:
    """A result table; an empty one (a page that tried no rates writes one) as an empty frame."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def compare_page(ref_dir: Path, new_dir: Path, tol: float = TOLERANCE) -> list[str]:
    """Every difference beyond tol between a page's reference result folder and a run's (empty: they agree)."""
    if not (new_dir / "claims.json").exists():
        return [f"{new_dir} holds no results (claims.json missing)"]
    out = compare_claims(json.loads((ref_dir / "claims.json").read_text())["claims"],
                         json.loads((new_dir / "claims.json").read_text())["claims"], tol)
    for path in sorted(ref_dir.glob("*.csv")):
        ref = _read(path)
        if path.name in TIMING_TABLES or not metric_columns(ref):  # timings; diagnostics such as epochs and rates
            continue
        if not (new_dir / path.name).exists():
            out.append(f"{path.name} is missing from {new_dir}")
            continue
        out += compare_table(ref, _read(new_dir / path.name), path.name, tol)
    return out


def copy_reference(src: Path, dest: Path) -> None:
    """Copy a smoke run's result folders (claims.json and the tables, not the timing tables) as the reference."""
    import shutil

    for page in sorted(p for p in src.iterdir() if (p / "claims.json").exists()):
        (dest / page.name).mkdir(parents=True, exist_ok=True)
        for f in [page / "claims.json", *sorted(page.glob("*.csv"))]:
            if f.name not in TIMING_TABLES:
                shutil.copy2(f, dest / page.name / f.name)


if __name__ == "__main__":  # `make nbval-reference`: python -m redlib.book.numbers results/smoke tests/nbval/results
    import sys

    copy_reference(Path(sys.argv[1]), Path(sys.argv[2]))
