import pytest

from redlib.core.claims import bound_verdict, check_ids, claims_path, load_claims
from redlib.core.paths import project_root

SHARED = project_root().parent / "shared" / "paper" / "paper_claims.yaml"


@pytest.mark.skipif(not SHARED.exists(), reason="the paper's shared folder is not beside this checkout")
def test_repository_copy_matches_the_papers_claims_file():
    assert claims_path().read_text() == SHARED.read_text()


def test_claims_are_indexed_by_id_with_their_group():
    claims = load_claims()
    assert claims["toy.mlp.average_collapse"]["group"] == "toy"
    assert claims["t1.red.acc"]["paper"] == pytest.approx(0.9725)
    with pytest.raises(KeyError, match="nope"):
        check_ids(["toy.linear.weights", "nope"])


@pytest.mark.parametrize(
    "per_seed, expected",
    [([1.0, 1.0], "holds"), ([1.0, 0.99], "partly"), ([0.5, 0.9], "does not hold"), ([], "does not hold")],
)
def test_bound_verdict(per_seed, expected):
    assert bound_verdict(per_seed, 1.0, 1.0) == expected


def test_bound_verdict_tolerance():
    assert bound_verdict([0.075], 0.0, 0.07, tol=0.01) == "holds"
    assert bound_verdict([0.075], 0.0, 0.07) == "does not hold"


def test_value_and_order_verdicts():
    from redlib.core.claims import order_verdict, value_verdict

    assert value_verdict([0.52, 0.56], 0.55, 0.05) == "holds"
    assert value_verdict([0.52, 0.70], 0.55, 0.05) == "partly"
    assert value_verdict([0.9], 0.55, 0.05) == "does not hold"
    assert order_verdict([True, True], True) == "holds"
    assert order_verdict([True, False], False) == "partly"
    assert order_verdict([False, False], True) == "partly"
    assert order_verdict([False], False) == "does not hold"


def test_a_number_over_some_seeds_names_them():
    from redlib.core.claims import seed_list

    assert seed_list([0]) == "seed 0" and seed_list([1, 0, 1]) == "seeds 0 and 1"
    assert seed_list((2, 0, 1)) == "seeds 0, 1 and 2"


def test_a_learning_rate_prints_as_the_paper_writes_it_and_never_wraps():
    from redlib.core.claims import rate

    assert [rate(x) for x in (1e-4, 0.001, 2.5e-4, 3e-5)] == ["1e\u20114", "1e\u20113", "2.5e\u20114", "3e\u20115"]
