"""The paper-vs-code page's words about our runs follow the recorded parameters (`redlib/book/paper_vs_code.py`)."""

import json

from redlib.book import paper_vs_code
from redlib.book.registry import config_for
from redlib.book.results import digests


def recorded(root, page, **params):
    """A page's claims.json whose provenance records the full profile's parameters, with `params` changed."""
    cfg = config_for(page).from_params(profile="full", **params)
    d = root / "full" / page
    d.mkdir(parents=True)
    (d / "claims.json").write_text(json.dumps({"claims": {}, "provenance": {"parameters": cfg.asdict()},
                                               "sha256": digests(d, {})}))


def test_the_words_change_when_the_recorded_parameters_do(tmp_path):
    for page in paper_vs_code.SPOKEN_OF:
        recorded(tmp_path / "a", page)
    recorded(tmp_path / "b", "task1_addition", patience=4, double_cap=False, expert_hidden=32)
    recorded(tmp_path / "b", "task2_mixed", step_mix="1:0.5,2:0.5", extensions=["isolated"])
    recorded(tmp_path / "b", "step_decomposition", dataset_size="first")
    a, b = paper_vs_code.run_facts("full", tmp_path / "a"), paper_vs_code.run_facts("full", tmp_path / "b")
    assert "patience 10" in a["pvc_protocol"] and "doubled" in a["pvc_protocol"] and "linear" in a["pvc_protocol"]
    assert "patience 4" in b["pvc_protocol"] and "doubled" not in b["pvc_protocol"] and "32" in b["pvc_protocol"]
    assert a["pvc_t2_mix"].startswith("80/20") and "50/50 as an extension" in a["pvc_t2_mix"]
    assert b["pvc_t2_mix"].startswith("50/50") and "extension" not in b["pvc_t2_mix"]
    # a run from before `extensions` recorded its Task 2 mix as `mix_variant`: read as it ran
    old = json.loads((tmp_path / "a" / "full" / "task2_mixed" / "claims.json").read_text())
    params = old["provenance"]["parameters"]
    old["provenance"]["parameters"] = {**{k: v for k, v in params.items() if k != "extensions"},
                                       "splits_reported": "iid,isolated", "digits_variant_on": "none",
                                       "mix_variant": "1:0.5,2:0.5"}
    (tmp_path / "a" / "full" / "task2_mixed" / "claims.json").write_text(json.dumps(old))
    assert paper_vs_code.run_facts("full", tmp_path / "a")["pvc_t2_mix"] == a["pvc_t2_mix"]
    assert "'final' (64,000/8,000/8,000)" in a["pvc_sizes"] and "step decomposition 'first'" in b["pvc_sizes"]
    assert "lr 1e\u20113" in a["pvc_mnist_setup"] and b["pvc_mnist_setup"] == "not run yet"  # as the paper writes it
    assert "AdamW at lr 1e\u20114," in a["pvc_protocol"]
