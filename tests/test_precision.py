"""The rule that decides stage 1's precision (redlib/bench/precision.py), on made-up claim values."""

import math

from redlib.bench.precision import FLOOR, compare, decide


def claims(**values):
    return {cid: {"value": v, "per_seed": [v]} for cid, v in values.items()}


def test_a_claim_within_its_bound_keeps_bf16_and_one_beyond_it_keeps_fp32():
    published = {"a": {"per_seed": [0.90, 0.90, 0.90]}, "b": {"per_seed": [0.80, 0.90, 1.00]}}
    fp32 = claims(a=0.900, b=0.900)
    rows = compare(fp32, claims(a=0.905, b=0.95), published)  # a moved 0.005 < 0.01; b 0.05 < its sd 0.1
    assert [r["within"] for r in rows] == [True, True] and decide(rows) == "bf16"
    assert rows[0]["bound"] == FLOOR and math.isclose(rows[1]["bound"], 0.1)
    rows = compare(fp32, claims(a=0.911, b=0.95), published)  # a moved 0.011: beyond the larger of 0.01 and sd 0
    assert [r["within"] for r in rows] == [False, True] and decide(rows) == "fp32"


def test_list_values_are_judged_element_by_element_and_words_must_not_change():
    published = {"r": {"per_seed": [[0.5, 0.9], [0.7, 0.9]]}, "o": {"per_seed": ["RED", "RED"]}}
    rows = compare(claims(r=[0.6, 0.9], o="RED"), claims(r=[0.7, 0.9], o="RED"), published)
    assert all(r["within"] for r in rows)  # 0.1 < the first element's sd (0.141)
    rows = compare(claims(r=[0.6, 0.9], o="RED"), claims(r=[0.6, 0.92], o="MoE"), published)
    assert [r["within"] for r in rows] == [False, False] and decide(rows) == "fp32"
    assert math.isclose(rows[0]["moved"], 0.02) and rows[1]["moved"] == math.inf


def test_no_claims_decide_nothing():
    assert decide([]) == "fp32"
