"""The paper's claims (`paper/paper_claims.yaml`, a copy of the paper's claims file) and verdict rules."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from .paths import project_root

VALUE_TOL = 0.05  # a `value` claim holds when a seed's number lies within this of the paper's


def claims_path() -> Path:
    """$REDLIB_CLAIMS, else the repository's copy `paper/paper_claims.yaml`."""
    return Path(os.environ.get("REDLIB_CLAIMS", project_root() / "paper" / "paper_claims.yaml"))


@lru_cache(maxsize=4)
def _load(path: str) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(Path(path).read_text())
    return {c["id"]: {**c, "group": group} for group, items in data.items() for c in items}


def load_claims(path: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """Every claim by id, each with its group (the yaml's top-level key)."""
    return _load(str(path or claims_path()))


def check_ids(ids, path: str | os.PathLike | None = None) -> None:
    """Raise KeyError naming any id the claims file does not know."""
    known = load_claims(path)
    unknown = sorted(set(ids) - set(known))
    if unknown:
        raise KeyError(f"claim id(s) not in {path or claims_path()}: {', '.join(unknown)}")


def within(value: float, low: float, high: float, tol: float = 0.0) -> bool:
    """True when value lies in [low - tol, high + tol]."""
    return low - tol <= value <= high + tol


def bound_verdict(per_seed, low: float, high: float, tol: float = 0.0) -> str:
    """'holds' when every seed's value is inside [low, high] (+- tol), 'partly' when some are, else 'does not hold'."""
    inside = [within(float(v), low, high, tol) for v in per_seed]
    if inside and all(inside):
        return "holds"
    return "partly" if any(inside) else "does not hold"


def value_verdict(per_seed, paper: float, tol: float) -> str:
    """A `value` claim: 'holds' when every seed is within tol of the paper's number, 'partly' when some are."""
    return bound_verdict(per_seed, paper - tol, paper + tol)


def flat(value: Any) -> list[float]:
    """The numbers of a measurement in a fixed order: a number, a list (per range), or a dict of either (per named
    case), flattened."""
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in flat(value[k])]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    return [float(value)]


def elementwise_verdict(per_seed: list[Any], paper: Any, tol: float) -> str:
    """A `value` claim of several numbers (per range, per domain, per named case), judged seed by seed as a scalar
    claim is: 'holds' when every number of every seed is within tol of the paper's, 'does not hold' when none is,
    else 'partly'. Only the cases the paper names are compared."""
    inside = []
    for seed_value in per_seed:
        ours = {k: seed_value[k] for k in paper if k in seed_value} if isinstance(paper, dict) else seed_value
        theirs = {k: paper[k] for k in ours} if isinstance(paper, dict) else paper
        a, b = flat(ours), flat(theirs)
        if len(a) != len(b) or not a:
            continue
        inside += [abs(x - y) <= tol for x, y in zip(a, b)]
    if not inside:
        return "not measured"
    return "holds" if all(inside) else "partly" if any(inside) else "does not hold"


def direction(per_seed: list[Any], paper: Any) -> str:
    """Which side of the paper's numbers ours lie on, over every seed and case: 'above', 'below' or 'both sides'."""
    diffs = []
    for seed_value in per_seed:
        ours = {k: seed_value[k] for k in paper if k in seed_value} if isinstance(paper, dict) else seed_value
        theirs = {k: paper[k] for k in ours} if isinstance(paper, dict) else paper
        a, b = flat(ours), flat(theirs)
        if len(a) == len(b):
            diffs += [x - y for x, y in zip(a, b)]
    if not diffs:
        return ""
    return "above" if min(diffs) >= 0 else "below" if max(diffs) <= 0 else "both sides"


CEILING = 0.995  # scores at or above it on both sides of a comparison leave no room to show an order
MIN_EFFECT = 0.01  # an order needs a paired difference at least this far beyond its spread (fixed in advance)


def pair_outcome(above: list[float], below: list[float]) -> tuple[str, float, float]:
    """Whether 'above > below' is decided by paired seeds: 'above' when the mean difference exceeds the spread (sd)
    of the per-seed differences by at least MIN_EFFECT, 'below' when it does so the other way, else 'tie' (one
    seed has no spread: a tie); with the mean difference and that spread."""
    d = np.asarray(above, float) - np.asarray(below, float)
    gap = float(d.mean())
    spread = float(d.std(ddof=1)) if len(d) > 1 else float("nan")
    if len(d) > 1 and abs(gap) >= spread + MIN_EFFECT:
        return ("above" if gap > 0 else "below"), gap, spread
    return "tie", gap, spread


def ranking(table, names: list[str]) -> str:
    """'A > B ≈ C > D': `names` by mean score over the seeds (rows of `table`), '>' where paired seeds decide the
    order (`pair_outcome`), '≈' where the difference is a tie: the words the ledger's rule would use."""
    ranked = list(table[names].mean().sort_values(ascending=False).index)
    text = ranked[0]
    for a, b in zip(ranked, ranked[1:]):
        text += (" > " if pair_outcome(table[a].tolist(), table[b].tolist())[0] == "above" else " ≈ ") + b
    return text


def paired_order_verdict(pairs: list[dict[str, Any]]) -> tuple[str, str]:
    """An `order` claim with per-seed values for each compared pair: 'holds' when every pair is decided the claimed
    way, 'does not hold' when one is decided the other way, 'partly' when one is a tie below the ceiling, and
    'untestable here' when the only ties are at the ceiling (both sides >= CEILING: no room to show an order); and a
    note naming the ties, then the decided pairs with the margin by which each clears its threshold (the paired sd
    plus MIN_EFFECT)."""
    outcomes = [(p, *pair_outcome(p["above_values"], p["below_values"])) for p in pairs]
    ties = [(_tie_words(p, gap, sd), at_ceiling(p)) for p, o, gap, sd in outcomes if o == "tie"]
    decided = "; ".join(f"{_tie_words(p, gap, sd)}, {small(abs(gap) - sd - MIN_EFFECT)} beyond the sd + {MIN_EFFECT:g} "
                        "it must clear" for p, o, gap, sd in outcomes if o != "tie")
    decided = f"decided: {decided}" if decided else ""
    if any(o == "below" for _, o, _, _ in outcomes):
        return "does not hold", decided
    if ties:
        words = "; ".join(w for w in ("tie: " + "; ".join(w for w, _ in ties), decided) if w)
        return ("untestable here" if all(c for _, c in ties) else "partly"), words
    return "holds", decided


def compared_values(entry: dict[str, Any]) -> list[float]:
    """Every value a comparison or effect claim compares (mean over seeds): its pairs' two sides, or the
    `compared` values its page recorded ([]: none recorded, a claim about one method's value)."""
    if entry.get("pairs"):
        return [float(np.mean(p[side])) for p in entry["pairs"] for side in ("above_values", "below_values")]
    return [float(v) for v in entry.get("compared", [])]


def untestable(entry: dict[str, Any]) -> bool:
    """The ceiling rule: a claim that compares methods or measures an effect, where every value it compares is at
    least CEILING, is untestable here, whichever way it would be decided."""
    values = compared_values(entry)
    return bool(values) and min(values) >= CEILING


def at_ceiling(pair: dict[str, Any]) -> bool:
    """Whether both sides of a compared pair score at or above CEILING (mean over seeds)."""
    return min(np.mean(pair["above_values"]), np.mean(pair["below_values"])) >= CEILING


def unbroken(number: str) -> str:
    """A formatted number whose exponent's minus is a non-breaking hyphen: "1.6e-07" never wraps at it."""
    return number.replace("e-", "e\u2011")


def rate(x: float) -> str:
    """A learning rate as the paper writes it, its digits and a short exponent that never wraps: 1e-4 -> "1e-4",
    2.5e-4 -> "2.5e-4"."""
    mantissa, exponent = f"{x:e}".split("e")
    return unbroken(f"{float(mantissa):g}e{int(exponent)}")


def small(x: float, digits: int = 3, sign: bool = False) -> str:
    """A number to `digits` decimals, except that an exact zero prints as "0" and a non-zero that would round to zero
    as "< 5e-4" ("> −5e-4" below zero; for 3 digits): never "0.000", "+0.000" or "-0.000"."""
    if x == 0:
        return "0"
    if abs(x) < 0.5 * 10 ** -digits:
        bound = f"{0.5 * 10 ** -digits:.0e}".replace("e-0", "e-")
        return f"> −{bound}" if x < 0 else f"< +{bound}" if sign else f"< {bound}"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _tie_words(pair: dict[str, Any], gap: float, sd: float) -> str:
    """'A − B = +0.001 ± 0.002 (paired sd, 3 seeds)', and whether both sides sit at the ceiling."""
    spread = f" ± {small(sd)} (paired sd, {len(pair['above_values'])} seeds)" if sd == sd else " (one seed: no spread)"
    return f"{pair['above']} − {pair['below']} = {small(gap, sign=True)}{spread}" + (
        " at the ceiling" if at_ceiling(pair) else "")


def order_verdict(per_seed_holds, mean_holds: bool) -> str:
    """An `order` claim: 'holds' in every seed, 'partly' when it holds in the mean or in some seeds."""
    per_seed_holds = list(per_seed_holds)
    if per_seed_holds and all(per_seed_holds):
        return "holds"
    return "partly" if mean_holds or any(per_seed_holds) else "does not hold"


def order_claim_verdict(entry: dict[str, Any]) -> str:
    """An `order` claim's measurement by the ledger's rule: untestable here when every value it compares is at the
    ceiling; else by its paired seeds where it recorded them (a difference inside their spread is a tie), else seed
    by seed (`order_verdict`). The ledger's `verdict` and the pages' sentences about an extension both call it."""
    if untestable(entry):
        return "untestable here"
    if entry.get("pairs"):
        return paired_order_verdict(entry["pairs"])[0]
    return order_verdict([bool(v) for v in entry.get("per_seed", [entry.get("value")])],
                         bool(entry.get("mean_holds", False)))


def spread(values: Iterable[float], digits: int = 3) -> str:
    """'mean (range min to max over N seeds)' of per-seed values ('mean (every one of N seeds)' when they agree)."""
    v = np.asarray(list(values), dtype=float)
    if v.min() == v.max():
        return f"{small(v.mean(), digits)} (every one of {len(v)} seeds)"
    return f"{small(v.mean(), digits)} (range {small(v.min(), digits)} to {small(v.max(), digits)} over {len(v)} seeds)"


def listing(values: Mapping[object, float], digits: int = 3) -> str:
    """'a 0.912, b 0.870' of labelled numbers (a list whose length follows the run's parameters)."""
    return ", ".join(f"{k} {float(x):.{digits}f}" for k, x in values.items())


def verdict_keys(prefix: str, verdicts: Mapping[str, str]) -> dict[str, str]:
    """The ledger's verdict of every claim on the page, keyed '<prefix>_v_<claim id with _ for .>'."""
    return {f"{prefix}_v_{cid.replace('.', '_')}": v for cid, v in verdicts.items()}


def seeds_words(n: int) -> str:
    """'1 seed', '3 seeds'."""
    return f"{n} seed{'s' * (n != 1)}"


def seed_list(seeds: Iterable[int]) -> str:
    """'seed 0', 'seeds 0 and 1', 'seeds 0, 1 and 2': which seeds a number averages."""
    names = [str(int(s)) for s in sorted(set(seeds))]
    return f"seed {names[0]}" if len(names) == 1 else f"seeds {', '.join(names[:-1])} and {names[-1]}"


# ---- the ledger's verdict of a claim (every page and the ledger judge by these) ----

# claims whose quantity we measure on other hardware and another backbone than the paper's: the figure is shown,
# no verdict is drawn from it
NOT_COMPARABLE = {"eff.train_time": "CPU hours of MiniLM-L6 on 2 cores against the paper's hours of Qwen3-0.6B on an "
                                    "RTX 3060 Ti",
                  "eff.peak_memory": "the CPU memory of a page and its workers against the paper's accelerator memory "
                                     "for Qwen3-0.6B"}


def per_seed_of(entry: dict[str, Any]) -> list[Any]:
    """A measurement's values per seed (its one value when it has no seeds)."""
    return entry.get("per_seed", [entry.get("value")])


def _bound(entry: dict[str, Any], paper: Any) -> tuple[float, float] | None:
    if "bound" in entry:
        return tuple(entry["bound"])
    if isinstance(paper, (int, float)):
        return float(paper), float(paper)
    if isinstance(paper, list) and len(paper) == 2 and all(isinstance(p, (int, float)) for p in paper):
        return float(paper[0]), float(paper[1])
    return None


def verdict(claim: dict[str, Any], entry: dict[str, Any] | None, tol: float = VALUE_TOL) -> str:
    """The verdict of one claim by the rule of its kind (the rules: `book/ledger.py`'s docstring)."""
    if entry is None:
        return "not measured"
    if claim.get("id") in NOT_COMPARABLE:
        return "not comparable"
    kind, paper, per_seed = claim["kind"], claim["paper"], per_seed_of(entry)
    if kind == "order" and untestable(entry):  # every value compared at the ceiling: no room to show an order
        return "untestable here"
    if "others_lowest" in entry:  # "the only method above a bound": ours inside it, and every other method below it
        own = bound_verdict(per_seed, *entry["bound"])
        return own if own != "holds" else ("holds" if all(v < entry["bound"][0] for v in entry["others_lowest"].values())
                                           else "does not hold")
    if kind == "order":  # by paired seeds where recorded (a difference inside their spread is a tie), else per seed
        return order_claim_verdict(entry)
    if kind == "bound":
        bound = _bound(entry, paper)
        return bound_verdict(per_seed, *bound) if bound else "not measured"
    if isinstance(paper, (int, float)):
        return value_verdict(per_seed, float(paper), tol)
    if isinstance(paper, list) or (isinstance(paper, dict) and isinstance(entry.get("value"), dict)):
        return elementwise_verdict(per_seed, paper, tol)  # per range / domain / named case, seed by seed
    return "not measured"


def verdicts(measured: dict[str, dict[str, Any]], claims_file=None, tol: float = VALUE_TOL) -> dict[str, str]:
    """Claim id -> the ledger's verdict, for a page's own measurements."""
    claims = load_claims(claims_file)
    return {cid: verdict(claims[cid], entry, tol) for cid, entry in measured.items()}


def verdicts_beside(measured: dict[str, dict[str, Any]], extension: str | None, tol: float = VALUE_TOL) -> str:
    """The claims whose verdict on one extension (its label) differs from the paper's protocol's, in words
    ("t2.order holds → partly; ..."), that none differs, or that the extension was not run (None)."""
    if extension is None:
        return "not run"
    claims = load_claims()
    moved = [(cid, verdict(claims[cid], e, tol), verdict(claims[cid], e["extensions"][extension], tol))
             for cid, e in measured.items() if extension in e.get("extensions", {})]
    words = "; ".join(f"{cid} {a} → {b}" for cid, a, b in moved if a != b)
    return words or ("no verdict differs" if moved else "not measured")
