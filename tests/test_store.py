import pytest
import torch
from torch import nn

from redlib.core.store import Store, state_equal


def trainer(calls):
    def train(model):
        calls.append(1)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        return {"epochs": 3}
    return train


def test_cached_stage_is_loaded_bit_exact_and_not_retrained(tmp_path):
    store, calls, key = Store(tmp_path), [], {"seed": 0, "lr": 0.1}
    first = nn.Linear(4, 2)
    meta = store.module("toy/x", key, first, trainer(calls))
    second = nn.Linear(4, 2)
    meta2 = store.module("toy/x", key, second, trainer(calls))
    assert len(calls) == 1 and meta["cached"] is False and meta2 == {"epochs": 3, "cached": True}
    assert state_equal(first, second)


def test_compute_time_is_counted_for_computed_stages_only(tmp_path):
    store, calls = Store(tmp_path), []
    store.module("toy/x", {"seed": 0}, nn.Linear(2, 1), trainer(calls))
    store.module("toy/x", {"seed": 0}, nn.Linear(2, 1), trainer(calls))
    store.tensors("feats", {"n": 1}, lambda: ({"h": torch.ones(2)}, {}))
    assert (store.hits, store.misses) == (1, 2) and set(store.seconds) == {"toy/x", "feats"}
    assert all(v >= 0 for v in store.seconds.values())
    assert Store(tmp_path).seconds == {}


def test_other_configuration_is_a_miss(tmp_path):
    store, calls = Store(tmp_path), []
    store.module("toy/x", {"seed": 0}, nn.Linear(2, 1), trainer(calls))
    store.module("toy/x", {"seed": 1}, nn.Linear(2, 1), trainer(calls))
    assert len(calls) == 2


def test_corrupt_entry_is_detected_and_rebuilt(tmp_path):
    store, calls, key = Store(tmp_path), [], {"seed": 0}
    store.module("toy/x", key, nn.Linear(2, 1), trainer(calls))
    path = store.path("toy/x", key)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])  # truncated file
    with pytest.warns(UserWarning, match="unusable"):
        store.module("toy/x", key, nn.Linear(2, 1), trainer(calls))
    assert len(calls) == 2 and store.load("toy/x", key) is not None


def test_mismatched_entry_is_detected(tmp_path):
    store, key = Store(tmp_path), {"seed": 0}
    other = store.save("toy/x", {"seed": 99}, {"w": torch.ones(2)})
    other.rename(store.path("toy/x", key))  # an entry filed under the wrong key
    with pytest.warns(UserWarning, match="does not match"):
        assert store.load("toy/x", key) is None
    tensors, meta = store.tensors("toy/x", key, lambda: ({"w": torch.zeros(2)}, {"made": True}))
    assert torch.equal(tensors["w"], torch.zeros(2)) and meta == {"made": True}
    assert torch.equal(store.load("toy/x", key)[0]["w"], torch.zeros(2))


def test_hits_and_misses_are_counted(tmp_path):
    store, calls = Store(tmp_path), []
    for _ in range(3):
        store.module("toy/x", {"seed": 0}, nn.Linear(2, 1), trainer(calls))
    assert (store.hits, store.misses) == (2, 1)


def test_bytes_overwritten_in_place_are_detected_and_rebuilt(tmp_path):
    """The header stays intact (the file still loads), but the weights changed: the checksum catches it."""
    store, calls, key = Store(tmp_path), [], {"seed": 0}
    store.module("toy/x", key, nn.Linear(8, 8), trainer(calls))
    path = store.path("toy/x", key)
    raw = bytearray(path.read_bytes())
    raw[-40:-8] = b"\xff" * 32  # inside the data section: NaNs in the weights
    path.write_bytes(bytes(raw))
    again = Store(tmp_path)
    with pytest.warns(UserWarning, match="do not match their checksum"):
        again.module("toy/x", key, nn.Linear(8, 8), trainer(calls))
    assert len(calls) == 2 and again.misses == 1
    assert [e["event"] for e in again.events] == ["rebuilt"] and "checksum" in again.rebuilt()[0]["why"]
    assert Store(tmp_path).load("toy/x", key) is not None  # the rebuilt entry is sound


def test_events_say_what_was_loaded_and_computed(tmp_path):
    store, calls = Store(tmp_path), []
    store.module("toy/x", {"seed": 0}, nn.Linear(2, 1), trainer(calls))
    store.module("toy/x", {"seed": 0}, nn.Linear(2, 1), trainer(calls))
    assert [e["event"] for e in store.events] == ["computed", "loaded"] and store.rebuilt() == []


def test_a_tensor_that_owns_its_storage_is_written_without_a_copy_and_views_are_copied(tmp_path):
    from redlib.core.store import _writable

    big, base = torch.randn(64, 8), torch.randn(10, 4)
    out = _writable({"big": big, "view": base[2:5], "again": big})
    assert out["big"].data_ptr() == big.data_ptr()  # a large cached prefix is not duplicated in memory
    assert out["view"].data_ptr() != base.data_ptr() and out["again"].data_ptr() != big.data_ptr()
    store = Store(tmp_path)
    store.save("toy/t", {"k": 1}, {"big": big, "view": base[2:5], "again": big})
    loaded, _ = store.load("toy/t", {"k": 1})
    assert torch.equal(loaded["big"], big) and torch.equal(loaded["view"], base[2:5]) and torch.equal(loaded["again"], big)


def test_an_entry_keeps_what_it_cost_to_compute_and_a_load_reports_it(tmp_path):
    """A warm run reports what its stages cost to train (recorded in each entry), not the seconds of loading them."""
    import time

    def slow():
        time.sleep(0.3)
        return {"w": torch.ones(3)}, {}

    cold = Store(tmp_path)
    cold.tensors("t/stage", {"a": 1}, slow)
    by_kind, unknown = cold.train_seconds()
    assert by_kind["t/stage"] >= 0.3 and unknown == 0
    warm = Store(tmp_path)
    warm.tensors("t/stage", {"a": 1}, slow)
    assert warm.hits == 1 and warm.train_seconds()[0]["t/stage"] == pytest.approx(by_kind["t/stage"], abs=1e-3)
    assert warm.seconds == {}  # nothing was computed in the warm run
