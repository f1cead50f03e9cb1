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


def test_the_speed_page_reads_the_comparison_in_reader_words():
    """The sentence names Task 1 and Task 2, each precision's stage-1 minutes, how many claims stayed within their
    bounds, the one nearest its bound and the decision; with no comparison it says so and how to run it."""
    from redlib.bench.precision import claims_table, sentence, time_table

    arm = lambda s1: {"stage_seconds": {"t1/stage1": s1, "t1/expert": 60.0}, "wall_seconds": s1 + 90.0,  # noqa: E731
                      "cache_at_start": 0, "git_commit": "abc1234def", "cpu": "Test CPU"}
    rows = [{"page": "task1_addition", "claim": "t1.red.acc", "fp32": 0.9, "bf16": 0.905, "moved": 0.005,
             "bound": 0.01, "within": True}]
    report = {"arms": {"task1_addition": {"fp32": arm(600.0), "bf16": arm(300.0)}}, "claims": rows,
              "decision": "bf16", "rule": "the rule"}
    words = sentence(report)
    assert words.startswith("Task 1: stage 1 5.0 min in bf16 against 10.0 in fp32, every stage 6.0 against 11.0.")
    assert "1 of 1 claim values" in words and "`t1.red.acc`, moved 0.0050 against 0.0100" in words
    assert words.endswith("the default is **bf16**.")
    assert list(time_table(report).data["page"]) == ["Task 1", "Task 1"]
    assert claims_table(report).data.loc[0, "within"] == "yes" and claims_table(report).data.loc[0, "page"] == "Task 1"
    assert sentence(None).startswith("The comparison has not run") and time_table(None) is None
