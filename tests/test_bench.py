"""The benchmark runs end to end in its smoke mode (it reports numbers; nothing here judges them)."""

import json

from redlib.bench import run_bench


def test_bench_smoke_mode_writes_a_complete_report(tmp_path):
    report = run_bench(tmp_path, smoke=True, notebooks=["reproduce"])
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["smoke"] is True and set(report) <= set(saved)
    pc = saved["prefix_cache"]
    assert pc["embedded"]["blocks"] == 6 and pc["embedded"]["bound"] == (6 + 4) / 6
    assert pc["qwen_shaped"][0]["cached_epoch"]["median"] > 0
    assert saved["features_cache"]["speedup"] > 0
    assert set(saved["throughput"]["methods"]) == {"global head", "softmax MoE", "RED"}
    nb = saved["notebooks"]["smoke"]["per_notebook"]["reproduce"]
    assert nb["wall_seconds"] > 0 and nb["peak_rss_mb"] > 0
    assert "run_task1" in saved["profile"]["cprofile"]
