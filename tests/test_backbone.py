import pytest
import torch

from redlib.core.config import ParameterError
from redlib.configs.task1_addition import Task1Config
from redlib.models.backbone import Backbone
from redlib.models.folders import BackboneError, resolve_backbone

TEXTS = ["What is 37 plus 12?", "What is 1 plus 2?", "Add 45 and 3."]


@pytest.mark.parametrize("which", ["embedded", "qwen"])
def test_cached_prefix_path_equals_full_forward(which, tiny_qwen):
    bb = Backbone("embedded" if which == "embedded" else str(tiny_qwen), k_trainable=2)
    tok = bb.tokenize(TEXTS)
    with torch.no_grad():
        full = bb(tok)
        cached = bb.forward_top(bb.prefix(tok, batch_size=2), tok.attention_mask)
    assert full.shape == (3, bb.dim)
    torch.testing.assert_close(cached, full, rtol=1e-5, atol=1e-5)


def test_only_top_blocks_train_and_reset_restores_them(tiny_qwen):
    bb = Backbone(str(tiny_qwen), k_trainable=2)
    trainable = {n for n, p in bb.full.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("layers.2.", "layers.3.")) for n in trainable)
    before = [p.clone() for p in bb.top_blocks().parameters()]
    with torch.no_grad():
        for p in bb.top_blocks().parameters():
            p.add_(1.0)
    bb.reset_top()
    assert all(torch.equal(a, b) for a, b in zip(before, bb.top_blocks().parameters()))


def test_decoder_mean_pooling_ignores_padding(tiny_qwen):
    bb = Backbone(str(tiny_qwen), k_trainable=1)
    with torch.no_grad():
        alone = bb(bb.tokenize([TEXTS[1]]))
        padded = bb(bb.tokenize(TEXTS))[1:2]  # shorter text padded to the longest
    torch.testing.assert_close(alone, padded, rtol=1e-4, atol=1e-5)


def test_bad_backbone_paths_are_one_line_errors(tmp_path):
    with pytest.raises(BackboneError, match="does not exist"):
        resolve_backbone(str(tmp_path / "nope"))
    with pytest.raises(BackboneError, match="holds no model"):
        resolve_backbone(str(tmp_path))
    cfg = Task1Config.from_params(backbone="/no/such/Qwen3-0.6B")  # configs never touch the disk ...
    with pytest.raises(ParameterError, match="does not exist") as err:
        cfg.preflight()  # ... the run's preflight does, before any kernel or training starts
    assert "\n" not in str(err.value)


def test_the_text_encoder_holds_its_prefix_only_while_needed(tmp_path):
    from redlib.core.store import Store
    from redlib.red.encoders import TextEncoder

    bb, store = Backbone("embedded", k_trainable=2), Store(tmp_path)
    texts = ["What is 3 plus 4?", "What is 12 plus 30?", "What is 7 plus 7?"]
    enc = TextEncoder(bb, texts, store, "t")
    assert enc._prefix is None and store.events == []  # nothing computed before it is needed
    h = enc.features()
    first = enc.prefix.clone()
    enc.release()
    assert enc._prefix is None
    assert torch.equal(enc.prefix, first) and torch.equal(enc.features(), h)  # loaded again from the cache, same bits
    assert [e["event"] for e in store.events] == ["computed", "loaded"]


def test_a_prefix_first_needed_inside_training_is_the_eval_mode_prefix(tmp_path):
    from redlib.core.store import Store
    from redlib.red.encoders import TextEncoder

    bb = Backbone("embedded", k_trainable=2)
    texts = ["What is 3 plus 4?", "What is 12 plus 30?"]
    expected = bb.prefix(bb.tokenize(texts))
    enc = TextEncoder(bb, texts, store=Store(tmp_path), namespace="t")
    enc.train()  # as stage 1's fit does before its first forward, which is when the prefix is first read
    assert torch.equal(enc.prefix, expected)
    assert all(m.training for m in bb.full.modules())  # the training loop's mode is left as it was


def test_text_batches_are_cut_to_their_longest_text_and_the_features_keep_item_order(tmp_path):
    """Padding beyond a batch's longest text is cut (a cost, never a value); the features run shortest texts first
    and come back in item order, each as its own batch would give it."""
    from redlib.core.store import Store
    from redlib.red.encoders import TextEncoder

    bb = Backbone("embedded", k_trainable=2)
    texts = ["What is 3 plus 4?", "What is the sum of 12 and 30, in the end, written as digits?", "Add 7 and 7.",
             "What is 1 plus 1?"]
    enc = TextEncoder(bb, texts, store=Store(tmp_path), namespace="t").eval()
    lengths = enc.mask.sum(1)
    short = lengths.argsort()[:2]
    assert int(lengths[short].max()) < enc.mask.shape[1]  # the pair is padded in the full table
    widths, forward_top = [], bb.forward_top
    bb.forward_top = lambda h, m: widths.append(h.shape[1]) or forward_top(h, m)  # the tokens each call runs on
    with torch.no_grad():
        cut = enc(short)
        assert widths == [int(lengths[short].max())]
        padded = forward_top(enc.prefix[short], enc.mask[short])
        alone = torch.cat([enc(torch.tensor([i])) for i in range(len(texts))])
    torch.testing.assert_close(cut, padded, rtol=1e-5, atol=1e-5)
    assert torch.equal(enc.length_order(torch.arange(4)), lengths.argsort(stable=True))
    torch.testing.assert_close(enc.features(), alone, rtol=1e-5, atol=1e-5)


def test_fp32_matmul_kernels_are_chosen_once_and_never_lower_precision():
    """The kernel choice is recorded with its reason, and whatever path it took multiplies at fp32 accuracy."""
    from redlib.speed import kernels

    rec = kernels.configure()
    assert rec["path"] in ("stock", "onednn") and rec["why"] and kernels.configure() is rec
    assert kernels._relative_error() <= kernels.TOLERANCE_FACTOR * max(rec["stock_rel_error"], 1e-7)
    if "fast_rel_error" in rec and rec["path"] == "stock":  # the fast path was tried and refused: it is off again
        assert torch.backends.mkldnn.matmul.fp32_precision == "none"


@pytest.mark.parametrize("mode", ["auto", "stock", "fast"])
def test_the_kernel_path_follows_the_cpu_and_never_computes_in_bf16(mode):
    """oneDNN's AVX-512 kernels where MKL has no AVX-512 path (AMD), MKL's own elsewhere, stock when forced; oneDNN
    capped below AMX, so the fast path asked for on an AMX CPU is fp32 (or refused), never bf16."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")}
    env["REDLIB_MATMUL"] = mode
    code = "import json; from redlib.speed import kernels; print(json.dumps(kernels.configure()))"
    rec = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout)
    from redlib.speed.kernels import ONEDNN_ISA_CAP

    assert rec["onednn_isa_cap"] == ONEDNN_ISA_CAP
    amd = rec["vendor"] == "AuthenticAMD" and rec["isa"].startswith("AVX512")
    if mode == "stock" or (mode == "auto" and not amd):
        assert rec["path"] == "stock", rec
    else:
        assert rec["path"] == "onednn" or "refused" in rec["why"], rec
    if rec["path"] == "onednn":
        from redlib.speed.kernels import TOLERANCE_FACTOR

        assert rec["fast_rel_error"] <= TOLERANCE_FACTOR * max(rec["stock_rel_error"], 1e-7)


def test_stage_one_in_bf16_lifts_the_cap_to_amx_for_the_page_and_its_workers():
    """A process set up for bf16 caps oneDNN at AMX (its bf16 products may use it) and a child it starts (a worker)
    keeps that cap; an fp32 page keeps the cap below AMX; a cap the reader set is never changed."""
    import json
    import os
    import subprocess
    import sys

    from redlib.speed.kernels import AMX_ISA, CAP_FOR, ONEDNN_ISA_CAP

    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", CAP_FOR)}
    code = ("import json, os, subprocess, sys; from redlib.speed import kernels; rec = kernels.configure({p!r}); "
            "child = subprocess.run([sys.executable, '-c', 'import json; from redlib.speed import kernels; "
            "print(json.dumps(kernels.configure()))'], capture_output=True, text=True, check=True).stdout; "
            "print(json.dumps([rec, json.loads(child)]))")

    def records(precision, **extra):
        out = subprocess.run([sys.executable, "-c", code.format(p=precision)], env={**env, **extra},
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    page, worker = records("bf16")
    assert page["onednn_isa_cap"] == worker["onednn_isa_cap"] == AMX_ISA and page["cap_for"] == "bf16"
    assert kernels_fp32_accurate(page) and kernels_fp32_accurate(worker)
    page, worker = records("fp32")
    assert page["onednn_isa_cap"] == worker["onednn_isa_cap"] == ONEDNN_ISA_CAP
    page, worker = records("bf16", ONEDNN_MAX_CPU_ISA="AVX2")
    assert page["onednn_isa_cap"] == worker["onednn_isa_cap"] == "AVX2"


def kernels_fp32_accurate(rec: dict) -> bool:
    """Whichever path a record took, its fp32 products stayed fp32-accurate (an AMX-computed path is refused)."""
    from redlib.speed.kernels import TOLERANCE_FACTOR

    return rec["path"] == "stock" or rec["fast_rel_error"] <= TOLERANCE_FACTOR * max(rec["stock_rel_error"], 1e-7)
