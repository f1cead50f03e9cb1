"""Op experts, the step decomposer and the executor (paper sections 4.5.4, 4.5.5 and 4.8).

- Op experts: the RED pipeline over single steps ("47 - 12"), the two domains being addition and subtraction;
  each expert trains alone on its operation's steps, over every step the programs can produce.
- Step decomposer: a trained token tagger (`models/tagger.py`) that turns the raw expression into the program:
  which number is step 1's left operand, which is each step's right operand and with which operator.
- Executor: runs a program step by step, each step answered by the op experts under a routing method
  (RED, the softmax MoE, AllFix = equal weights), feeding x_s into the next step.

Its knobs: `configs/step_decomposition.py`.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd
import torch

from ..core import measure
from ..core.claims import small
from ..core.metrics import accuracy, macro_f1
from ..core.runtime import seed_everything
from ..core.settings import StageSettings
from ..core.store import Store
from ..core.train import TrainConfig, fit
from ..models.backbone import Backbone
from ..models.tagger import TAGS, Tagger, predict_tags, tag_of, tagging_loss
from ..red import methods
from ..red.types import STAGE_KINDS as RED_KINDS
from ..tasks.arithmetic import MIN_SUM
from ..tasks.mixed import OPS, step_text
from ..tasks.mixed_data import make_task2, step_pairs
from ..configs.ranges import Setting
from ..configs.step_decomposition import DecompositionConfig
from . import ranges
from .ranges import profile_words  # noqa: F401 (the page's opening line)
from .step_decomposition_report import PAPER_KEYS, found  # noqa: F401 (found: the page's, `step_decomposition_report` writes it)
from .task2_mixed import spec_for

# The cache kind of this page's own stage ("sd/<kind>", under its KEY), and what it holds (the Speed page names it).
STAGE_KINDS = {"decomposer": "the step decomposer (a tagger over the backbone's token states)"}
# the executor's routings: the book's name -> the registered method over the op experts
ROUTINGS = {"RED": "RED", "softmax MoE": "softmax MoE", "AllFix (equal weights)": "uniform averaging",
            "oracle experts": "oracle experts", "global head": "global head"}
Program = tuple[list[int], str]  # operands in slot order, operators of steps 1..k


def op_frames(cfg: DecompositionConfig, seed: int, number_format: str) -> dict[str, pd.DataFrame]:
    """Single-step samples per operation (train, val: drawn from every possible step) and every step once (test)."""
    pool = step_pairs()
    pool = pool.assign(text=[step_text(a, op, b, number_format) for a, op, b in zip(pool["left"], pool["op"], pool["right"])],
                       label=pool["result"] - MIN_SUM, domain=pool["op"].map(OPS.index))
    rng = np.random.default_rng(seed)
    n = {"train": cfg.op_samples, "val": max(1, cfg.op_samples // 8)}
    frames = {part: pd.concat([pool[pool["op"] == op].sample(k, replace=True, random_state=rng) for op in OPS],
                              ignore_index=True) for part, k in n.items()}
    return {**frames, "test": pool}


def _ops_data(cfg: DecompositionConfig, seed: int, setting: Setting) -> tuple[dict[str, pd.DataFrame], dict]:
    frames = op_frames(cfg, seed, setting.number_format)
    key = {"ops": "every step of [2,100] +- [2,50] in [2,100]", "op_samples": cfg.op_samples, "seed": seed,
           "number_format": setting.number_format}
    return frames, key


OPS_DOMAIN = ("domain", ["add", "subtract"], "op")


def train_ops(cfg: DecompositionConfig, seed: int, setting: Setting, bb: Backbone, store: Store,
              settings: StageSettings | None = None, variants: bool | None = None) -> ranges.RangeRun:
    """The op experts' pipeline run under `settings` (None: the protocol's; cached stages load); its test part
    holds every possible step once."""
    frames, key = _ops_data(cfg, seed, setting)
    return ranges.run_on(cfg, cfg.KEY, seed, setting, frames, key, bb, store, OPS_DOMAIN, settings, variants)


def prefetch_ops(cfg: DecompositionConfig, bb: Backbone, store: Store) -> None:
    """The op experts' small stages of every seed and setting, side by side in one pool (`ranges.prefetch`)."""
    runs = [(seed, *_ops_data(cfg, seed, st)) for st in cfg.settings for seed in cfg.seeds_for(st)]
    ranges.prefetch(cfg, runs, bb, store, OPS_DOMAIN)


# the attribution's rates (stage 1, small stages): 1e-3 is where our earlier learning-rate grid put both, 1e-4 the paper's
ATTRIBUTION_RATES = (1e-3, 1e-4)
STAGE_KINDS_SMALL = [k for k in RED_KINDS if k not in ("prefix", "stage1", "features")]


def attribution(cfg: DecompositionConfig, bb: Backbone, store: Store) -> pd.DataFrame:
    """The 2x2 on the first seed of the claims' setting: stage 1 at each rate x every small stage at each rate (each
    stage under the config's convergence rule), and how each routing executes the true programs over those op
    experts. One row per cell; the cell at the config's own rates is the claims' run, loaded from the cache. A cell
    trains only what it reads: no variant method (the code's logit experts and gate, stage 4, the head on all of
    train)."""
    main, seed = cfg.settings[0], cfg.seed
    test = make_task2(spec_for(cfg, seed, main))["test"]
    truth = list(zip(test["operands"], test["ops"]))
    rows = []
    for stage1_lr in ATTRIBUTION_RATES:
        for small_lr in ATTRIBUTION_RATES:
            lrs = {kind: small_lr for kind in STAGE_KINDS_SMALL} | {"stage1": stage1_lr}
            # only what the attribution reads
            ops = train_ops(cfg, seed, main, bb, store, cfg.stage_settings(lrs), variants=False)
            answers = execute(ops, truth, main.number_format)
            stage1 = next(e for e in ops.red.epochs if e["stage"] == "stage 1")
            single = ranges.evaluate(ops)["overall"].set_index("method")["accuracy"]
            rows.append({"stage 1 lr": stage1_lr, "small stages lr": small_lr, "stage 1 val loss": stage1["val loss"],
                         "oracle single steps": float(single["oracle experts"]),
                         **{name: accuracy(test["answer"].to_numpy(), answers[name]) for name in PAPER_KEYS}})
    return pd.DataFrame(rows).assign(seed=seed, run=main.label)


def execute(ops: ranges.RangeRun, programs: list[Program | None], number_format: str,
            routings: dict[str, str] = ROUTINGS) -> dict[str, np.ndarray]:
    """Each routing's final answer for each program; -1 for no program, or a step outside the experts' domain
    (an earlier wrong step left [2, 100])."""
    test = ops.frames["test"]
    row = {t: i for i, t in enumerate(test["text"])}
    h, domains = ops.red.features["test"], ops.red.data.domains["test"]
    built = methods.methods(ops.red, list(ROUTINGS.values()))
    steps = max((len(p[1]) for p in programs if p), default=0)
    out = {}
    for name, registered in routings.items():
        x = np.array([p[0][0] if p else -1 for p in programs])
        alive = x >= 0
        for s in range(steps):
            todo = [i for i, p in enumerate(programs) if alive[i] and len(p[1]) > s]
            rows = [row.get(step_text(int(x[i]), programs[i][1][s], programs[i][0][s + 1], number_format)) for i in todo]
            for i, r in zip(todo, rows):
                alive[i] &= r is not None
            todo, rows = [i for i in todo if alive[i]], [r for r in rows if r is not None]
            if todo:
                idx = torch.tensor(rows)
                logits, _ = built[registered](h[idx], domains[idx])
                x[todo] = logits.argmax(-1).cpu().numpy() + MIN_SUM
        out[name] = np.where(alive, x, -1)
    return out


def trace(ops: ranges.RangeRun, program: Program, number_format: str) -> pd.DataFrame:
    """One program executed under RED step by step: the step's text, routing weights, each expert's answer, x_s."""
    test = ops.frames["test"]
    row = {t: i for i, t in enumerate(test["text"])}
    red = methods.methods(ops.red, ["RED"])["RED"]
    x, rows = program[0][0], []
    for s, (op, o) in enumerate(zip(program[1], program[0][1:]), start=1):
        text = step_text(x, op, o, number_format)
        r = row.get(text)
        if r is None:
            rows.append({"step": s, "text": text, "note": "outside the experts' domain"})
            break
        hs = ops.red.features["test"][r:r + 1]
        logits, alpha = red(hs, ops.red.data.domains["test"][r:r + 1])
        each = {f"expert {n} alone": int((ops.red.head(hs + e(hs))).argmax(-1)) + MIN_SUM
                for n, e in zip(("add", "subtract"), ops.red.residuals)}
        x = int(logits.argmax(-1)) + MIN_SUM
        rows.append({"step": s, "text": text, "alpha add": float(alpha[0, 0]), "alpha subtract": float(alpha[0, 1]),
                     **each, "answer": x, "true step result": int(test["result"].iloc[r])})
    return pd.DataFrame(rows)


# ---- the step decomposer ----

def number_starts(text: str) -> list[int]:
    """Character offset of each number in text order ("4 5" in the digits format is one number)."""
    starts = []
    for i, c in enumerate(text):
        glued = i >= 2 and text[i - 1] == " " and text[i - 2].isdigit()
        if c.isdigit() and not (i and text[i - 1].isdigit()) and not glued:
            starts.append(i)
    return starts


def read_number(text: str, start: int) -> int | None:
    """The number written from `start` (digits, possibly single-space separated); None if no digit is there."""
    digits, i = "", start
    while i < len(text) and (text[i].isdigit() or (text[i] == " " and i + 1 < len(text) and text[i + 1].isdigit()
                                                   and digits)):
        digits += text[i].strip()
        i += 1
    return int(digits) if digits else None


def encode(bb: Backbone, df: pd.DataFrame, with_tags: bool = True) -> dict[str, torch.Tensor]:
    """Token ids, mask and character offsets of each text; with gold tags from the record's slots and operators."""
    enc = bb.tokenizer(df["text"].tolist(), padding=True, return_offsets_mapping=True, return_tensors="pt")
    out = {"ids": enc["input_ids"], "mask": enc["attention_mask"], "offsets": enc["offset_mapping"]}
    if with_tags:
        tags = torch.zeros_like(out["ids"])
        for n, (text, slots, ops) in enumerate(zip(df["text"], df["slots"], df["ops"])):
            first_token = {int(s): t for t, (s, e) in enumerate(out["offsets"][n].tolist()) if e > s}
            for start, slot in zip(number_starts(text), slots):
                t = first_token.get(start)
                if t is not None:
                    tags[n, t] = tag_of(slot, ops[slot - 1] if slot else None)
        out["tags"] = tags
    return out


def assemble(text: str, tags: list[int], offsets: list[tuple[int, int]]) -> Program | None:
    """The program the tags describe, or None ("no program") when they do not describe exactly one chain."""
    parsed: dict[int, tuple[str, int]] = {}
    for t, tag in enumerate(tags):
        if tag == 0:
            continue
        name = TAGS[tag]
        slot, op = (0, "") if name == "first" else (int(name[1:]), name[0])
        value = read_number(text, offsets[t][0])
        if slot in parsed or value is None:
            return None
        parsed[slot] = (op, value)
    k = len(parsed) - 1
    if k < 1 or set(parsed) != set(range(k + 1)):
        return None
    return [parsed[s][1] for s in range(k + 1)], "".join(parsed[s][0] for s in range(1, k + 1))


def train_decomposer(cfg: DecompositionConfig, seed: int, frames: dict[str, pd.DataFrame], key: dict, bb: Backbone,
                     store: Store) -> Tagger:
    """The tagger trained on the train programs (validation: val's), loaded from the cache when already trained."""
    seed_everything(seed)  # its initial weights, whatever ran (or loaded) before it in this process
    model = Tagger(bb.full.get_input_embeddings().weight.detach().cpu(), cfg.tagger_hidden)
    tc = TrainConfig(lr=cfg.tagger_lr, weight_decay=cfg.weight_decay, batch_size=cfg.batch_size,
                     virtual_batch=cfg.batch_size, max_epochs=cfg.tagger_epochs, patience=cfg.patience, seed=seed,
                     desc="step decomposer")
    n = {"train": cfg.tagger_samples, "val": max(1, cfg.tagger_samples // 8)}  # the first expressions of each part
    data = {k: encode(bb, frames[k].head(n[k])) for k in ("train", "val")}

    def train(m: Tagger) -> dict:
        torch.manual_seed(seed)
        res = fit(m, tagging_loss, *[(d["ids"], d["mask"], d["tags"]) for d in data.values()], tc)
        return {"best_epoch": res.best_epoch, "epochs_run": len(res.history)}

    store.module(f"{cfg.KEY}/decomposer", {**key, "backbone": bb.identity, "train": asdict(tc),
                                           "hidden": cfg.tagger_hidden, "tags": TAGS, "samples": n,
                                           "init": "seeded"}, model, train)
    return model.eval()


def decompose(model: Tagger, bb: Backbone, df: pd.DataFrame) -> list[Program | None]:
    """The decomposer's program for each text (None: no program)."""
    enc = encode(bb, df, with_tags=False)
    tags = predict_tags(model, enc["ids"], enc["mask"]).tolist()
    return [assemble(text, t, [tuple(o) for o in off]) for text, t, off in zip(df["text"], tags, enc["offsets"].tolist())]


def run(cfg: DecompositionConfig, store: Store) -> dict[str, pd.DataFrame]:
    """Every seed and setting (the op experts' small stages of all of them side by side first), each row tagged with
    its seed and setting; then the 2x2 attribution where the config asks for it."""
    bb = ranges.backbone(cfg)
    prefetch_ops(cfg, bb, store)
    tables = [run_seed(cfg, s, st, bb, store) for st, s in ranges.every_run(cfg, "decomposition")]
    extra = {"attribution": attribution(cfg, bb, store)} if cfg.attribution else {}
    return ranges.stack(tables) | extra


def run_seed(cfg: DecompositionConfig, seed: int, setting: Setting, bb: Backbone, store: Store) -> dict[str, pd.DataFrame]:
    """One seed and setting: op experts, decomposer, and the test programs executed with true and decoded programs."""
    spec = spec_for(cfg, seed, setting)
    frames = make_task2(spec)
    ops = train_ops(cfg, seed, setting, bb, store)
    tagger = train_decomposer(cfg, seed, frames, {"spec": asdict(spec)}, bb, store)
    test = frames["test"]
    truth = list(zip(test["operands"], test["ops"]))
    decoded = decompose(tagger, bb, test)
    exact = np.array([d is not None and list(d[0]) == list(t[0]) and d[1] == t[1] for d, t in zip(decoded, truth)])
    rows = []
    for source, programs in (("true programs", truth), ("decomposer's programs", decoded)):
        answers_by = execute(ops, programs, setting.number_format)
        for name, answers in answers_by.items():
            for k in ["all", *sorted(test["steps"].unique())]:
                sel = np.ones(len(test), bool) if k == "all" else (test["steps"] == k).to_numpy()
                y, p = test["answer"].to_numpy()[sel], answers[sel]
                rows.append({"programs": source, "routing": name, "steps": str(k), "accuracy": accuracy(y, p),
                             "macro_f1": macro_f1(y, p, np.unique(y))})
    decomp = test[["phrasing", "steps"]].assign(exact=exact, no_program=[d is None for d in decoded])
    scores = ranges.evaluate(ops)
    return {"execution": ops.tag(pd.DataFrame(rows)), "decomposer": ops.tag(decomp),
            "op_experts": scores["overall"], "epochs": scores["epochs"],
            "examples": _examples(ops, test, decoded, setting)}


def _examples(ops: ranges.RangeRun, test: pd.DataFrame, decoded: list[Program | None], setting: Setting) -> pd.DataFrame:
    """A traced program per number of steps: text, the decoded program, and RED's execution step by step."""
    out = []
    for k, grp in test.groupby("steps"):
        i = grp.index[0]
        prog = decoded[i] or (list(test["operands"][i]), test["ops"][i])
        out.append(trace(ops, prog, setting.number_format).assign(  # `answer` is each step's x_s; the expression's own:
            expression=test["text"][i], **{"final answer": test["answer"][i]},
            decoded="no program" if decoded[i] is None else "ok"))
    return ops.tag(pd.concat(out, ignore_index=True))


# ---- tables and claims ----

def decomposer_table(decomposer: pd.DataFrame) -> pd.DataFrame:
    """Per phrasing (rows) and setting and number of steps (columns): the share of exact programs and, after a slash
    where there are any, the share of "no program" (mean over seeds; the rest are wrong programs)."""
    mean = decomposer.groupby(["run", "steps", "phrasing"], sort=False)[["exact", "no_program"]].mean()
    cells = [small(e) + (f" / {small(n)}" if n else "") for e, n in zip(mean["exact"], mean["no_program"])]
    return pd.Series(cells, index=mean.index).unstack(["run", "steps"]).sort_index(axis=1, level=["run", "steps"],
                                                                                   sort_remaining=False)


def claims(cfg: DecompositionConfig, tables: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """sd.* in the claims' setting with the true programs (the paper's study); the decomposer's programs and the other
    settings beside them as extensions."""
    t = tables
    main, *others = cfg.settings
    out = _measured(t, main, "true programs")
    extra = {f"{st.description}, true programs": _measured(t, st, "true programs") for st in others}
    extra |= {f"{st.description}, decomposer's programs": _measured(t, st, "decomposer's programs")
              for st in cfg.settings}
    for label, entries in extra.items():
        for cid, entry in entries.items():
            if cid in out and cid != "sd.decomposer.exact":
                out[cid].setdefault("extensions", {})[label] = entry
    return out


def _measured(t: dict[str, pd.DataFrame], st: Setting, source: str) -> dict[str, dict]:
    ex = t["execution"][(t["execution"]["run"] == st.label) & (t["execution"]["programs"] == source)]
    common = {"run": st.label, "programs": source}
    out = {}
    for name, key in PAPER_KEYS.items():
        mine = ex[ex["routing"] == name].pivot_table(index="seed", columns="steps", values="accuracy")
        out[f"sd.{key}.acc"] = {"value": mine.mean().to_dict(), "per_seed": [r.to_dict() for _, r in mine.iterrows()],
                                **common}
    acc = ex[ex["steps"] == "all"].pivot_table(index="seed", columns="routing", values="accuracy")
    acc = acc[list(PAPER_KEYS)]
    out["sd.order"] = {**measure.ordering(acc, list(PAPER_KEYS)), **common}
    dec = t["decomposer"][t["decomposer"]["run"] == st.label].groupby("seed")["exact"].mean()
    out["sd.decomposer.exact"] = measure.bound(dec, 0.95, 1.0, run=st.label,
                                               measure="exact-match programs; the bound is our reading (no number "
                                                       "in the paper)")
    return out
