"""What a notebook records for a claim: the measurement per seed, never a verdict (the ledger judges).

One helper per kind of claim in the paper's claims file:
- `value`: a number per seed (compared with the paper's number within a tolerance);
- `per_range`: a list per seed, one number per range or domain (compared element-wise on the mean);
- `order`: whether an ordering holds, per seed and for the means;
- `bound`: a number per seed that must fall in [low, high] (the paper's range unless given here).
Each returns the claims.json entry: `value` (mean over seeds), `per_seed`, and any details passed as keywords.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def _clean(extra: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in extra.items() if v is not None}


def value(per_seed: Sequence[float], **extra: Any) -> dict[str, Any]:
    """A number measured in each seed; its value is the mean."""
    per_seed = [float(v) for v in per_seed]
    return {"value": float(np.mean(per_seed)), "per_seed": per_seed, **_clean(extra)}


def per_range(per_seed: Sequence[Sequence[float]], **extra: Any) -> dict[str, Any]:
    """One list per seed (a number per range or domain); its value is the element-wise mean."""
    rows = [[float(v) for v in r] for r in per_seed]
    return {"value": np.mean(rows, axis=0).tolist(), "per_seed": rows, **_clean(extra)}


def order(per_seed_holds: Sequence[bool], mean_holds: bool, value: Any = None,
          pairs: Sequence[tuple[str, str, Sequence[float], Sequence[float]]] | None = None, **extra: Any) -> dict[str, Any]:
    """Whether a claimed ordering holds in each seed and between the means; `value` shows the numbers compared.
    `pairs` (above, below, per-seed values of each) lets the ledger tell a decided order from a tie."""
    entry = {"value": value, "per_seed": [bool(v) for v in per_seed_holds], "mean_holds": bool(mean_holds), **_clean(extra)}
    if pairs:
        entry["pairs"] = [{"above": a, "below": b, "above_values": [float(x) for x in va],
                           "below_values": [float(x) for x in vb]} for a, b, va, vb in pairs]
    return entry


def ordering(table, chain: Sequence[str]) -> dict[str, Any]:
    """`order` for 'chain[0] > chain[1] > ...' on a (seeds x names) DataFrame of scores."""
    pairs = list(zip(chain, chain[1:]))
    per_seed = [all(table.loc[s, a] > table.loc[s, b] for a, b in pairs) for s in table.index]
    mean_holds = all(table[a].mean() > table[b].mean() for a, b in pairs)
    return order(per_seed, mean_holds, value={c: float(table[c].mean()) for c in chain},
                 pairs=[(a, b, table[a].tolist(), table[b].tolist()) for a, b in pairs])


def bound(per_seed: Sequence[float], low: float | None = None, high: float | None = None, **extra: Any) -> dict[str, Any]:
    """A number per seed that must lie in [low, high]; give the bound where the paper states it only in words."""
    entry = value(per_seed, **extra)
    if low is not None and high is not None:
        entry["bound"] = [float(low), float(high)]
    return entry
