"""Synthetic text domains for the routing-analysis experiments, and their tokenization.

Each domain is a handful of sentence templates whose slots are filled at random (a seeded `random.Random`),
as in the paper's routing experiments: code / math / story / science (experiment 1) and psychology /
history / medicine / business (experiment 3, plain English with shared function words). Texts are
tokenized with a Hugging Face tokenizer read from disk: the one shipped with the embedded MiniLM backbone by
default, or a local folder (the paper's `gpt2`).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.config import ParameterError
from ..models.folders import tokenizer_path
from ..models.moe import PAD  # encoded batches pad with the models' padding id; token ids start at 1

GENERATOR_VERSION = 1  # bump when a template or slot list changes, so cached stages trained on old texts are not reused

_WORDS = {
    "fn": ["compute", "merge", "parse", "scale", "update", "render", "filter", "load"],
    "var": ["data", "items", "values", "total", "count", "result", "buffer", "scores"],
    "arg": ["x", "y", "n", "key", "path", "size", "step", "limit"],
    "op": ["+", "-", "*", "//", "%"],
    "cls": ["Parser", "Cache", "Matrix", "Client", "Queue", "Tree"],
    "mod": ["math", "json", "os", "random", "time", "re"],
    "name": ["Anna", "Tom", "Lena", "Omar", "Mia", "Jack", "Sara", "Leo"],
    "place": ["village", "town", "castle", "farm", "harbor", "forest cabin"],
    "feature": ["river", "mountains", "old bridge", "dark woods", "sea", "valley"],
    "object": ["chest", "box", "book", "door", "letter", "drawer"],
    "adj": ["golden", "tiny", "strange", "shining", "broken", "secret"],
    "thing": ["key", "map", "ring", "feather", "stone", "bird"],
    "creature": ["fox", "dragon", "giant", "owl", "wolf", "fairy"],
    "time": ["morning", "evening", "winter night", "summer day", "stormy night"],
    "planet": ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn"],
    "element": ["hydrogen", "carbon", "oxygen", "iron", "gold", "neon", "sodium"],
    "state": ["solid", "liquid", "gas"],
    "medium": ["air", "water", "steel", "glass", "wood"],
    "organelle": ["mitochondria", "ribosomes", "vacuoles", "chloroplasts"],
    "energy": ["heat", "light", "sound", "electricity"],
    "disorder": ["anxiety", "depression", "insomnia", "burnout", "phobia"],
    "bias": ["confirmation bias", "anchoring", "the halo effect", "loss aversion"],
    "emotion": ["stress", "anger", "curiosity", "motivation", "empathy"],
    "mind": ["memory", "attention", "self esteem", "decision making"],
    "city": ["Paris", "Vienna", "Rome", "Utrecht", "Westphalia", "Carthage"],
    "nation": ["France", "Spain", "England", "Prussia", "Austria", "Sweden"],
    "empire": ["Roman", "Ottoman", "Mongol", "Byzantine", "Persian"],
    "artifact": ["coins", "pottery", "a bronze sword", "clay tablets", "a stone altar"],
    "ruler": ["Augustus", "Charlemagne", "Suleiman", "Justinian", "Cyrus"],
    "symptom": ["fever", "fatigue", "headache", "chest pain", "a cough", "nausea"],
    "drug": ["aspirin", "insulin", "amoxicillin", "ibuprofen", "metformin"],
    "disease": ["diabetes", "asthma", "hypertension", "arthritis", "migraine"],
    "measure": ["blood pressure", "cholesterol", "blood sugar", "heart rate"],
    "product": ["electric cars", "software", "coffee", "smartphones", "solar panels"],
    "region": ["Europe", "Asia", "South America", "Africa", "North America"],
    "strategy": ["pricing", "hiring", "marketing", "supply chain", "remote work"],
    "company": ["the firm", "the startup", "the retailer", "the bank", "the airline"],
    "quarter": ["first", "second", "third", "fourth"],
}

TEMPLATES: dict[str, list[str]] = {
    "code": [
        "def {fn}({arg}, {arg2}):\n    return {arg} {op} {arg2}",
        "for i in range({n}):\n    {var}.append(i {op} {k})",
        "if {var} > {n}:\n    print('{var} is too large')",
        "{var} = [{k}, {n}, {m}]\nprint(len({var}))",
        "class {cls}:\n    def __init__(self, {arg}):\n        self.{arg} = {arg}",
        "import {mod}\n{var} = {mod}.{fn}({arg}, {n})",
    ],
    "math": [
        "Solve for x: {k}x + {n} = {m}.",
        "The sum of {n} and {m} is {sum}.",
        "Compute {k} times {n}, which equals {prod}.",
        "A triangle with sides {k}, {n} and {m} has perimeter {per}.",
        "The derivative of x^{k} is {k}x^{km1}.",
        "If {n} is divided by {k}, the remainder is {rem}.",
    ],
    "story": [
        "Once upon a time, {name} lived in a {place} near the {feature}.",
        "{name} opened the old {object} and found a {adj} {thing} inside.",
        "One {time}, {name} met a {adj} {creature} who asked for help.",
        "After a long journey, {name} returned to the {place} and smiled.",
        "{name} and {name2} walked along the {feature} until the sun went down.",
        "The {creature} gave {name} a {adj} {thing} and vanished.",
    ],
    "science": [
        "{element} is a {state} at room temperature.",
        "{planet} orbits the Sun once every {days} days.",
        "The speed of sound in {medium} is about {speed} meters per second.",
        "A plant cell contains a nucleus, {organelle} and cytoplasm.",
        "A battery converts chemical energy into {energy}.",
        "At {n} degrees Celsius, the {element} sample became a {state}.",
    ],
    "psychology": [
        "The therapist noted that the patient showed signs of {disorder} after {n} sessions.",
        "A study of {big} participants found that {bias} changes how people judge risk.",
        "Cognitive behavioral therapy reduced {disorder} in {pct} percent of clients.",
        "Researchers observed that {emotion} rises when people doubt their {mind}.",
        "The clinical findings suggest that {mind} improves when {emotion} is low.",
    ],
    "history": [
        "In {year}, the treaty of {city} ended the war between {nation} and {nation2}.",
        "Archaeologists found {artifact} near {city}, dating back to the {century}th century.",
        "The {empire} empire expanded its territory under {ruler} in {year}.",
        "Historians argue that the fall of {city} in {year} changed trade in {region}.",
        "The evidence shows that {nation} signed an alliance with {nation2} in {year}.",
    ],
    "medicine": [
        "The patient presented with {symptom} and was treated with {drug} for {n} days.",
        "A clinical trial of {big} patients showed that {drug} lowered {measure} by {pct} percent.",
        "Doctors recommend {drug} for patients with chronic {disease}.",
        "Symptoms of {disease} include {symptom} and {symptom2}.",
        "The findings suggest that treatment of {disease} improves {measure} within {n} weeks.",
    ],
    "business": [
        "The company reported revenue of {big} million dollars in the {quarter} quarter.",
        "Market analysis shows that demand for {product} grew by {pct} percent in {region}.",
        "The manager introduced a new {strategy} strategy to cut costs by {pct} percent.",
        "Investors expect {company} to expand into {region} next year.",
        "The findings suggest that {company} will sell more {product} in the {quarter} quarter.",
    ],
}
EXPERIMENT_DOMAINS = {"code": ("code", "math", "story", "science"),
                      "domains": ("psychology", "history", "medicine", "business")}


def _fill(template: str, rng: random.Random) -> str:
    """One sample: every slot of the template filled at random (numbers consistent where the text states a result)."""
    k, n, m = rng.randint(2, 12), rng.randint(2, 99), rng.randint(2, 99)
    slots = {key: rng.choice(words) for key, words in _WORDS.items()}
    slots |= {f"{key}2": rng.choice([w for w in words if w != slots[key]]) for key, words in _WORDS.items()}
    slots |= {"k": k, "n": n, "m": m, "sum": n + m, "prod": k * n, "per": k + n + m, "km1": k - 1, "rem": n % k,
              "days": rng.randint(80, 11000), "speed": rng.randint(300, 6000), "big": rng.randint(20, 900),
              "pct": rng.randint(3, 60), "year": rng.randint(800, 1950), "century": rng.randint(3, 18)}
    return template.format(**slots)


def generate(domain: str, n: int, seed: int, part: str = "train") -> list[str]:
    """`n` samples of one domain, reproducible from (domain, seed, part); each part is its own random stream."""
    if domain not in TEMPLATES:
        raise ParameterError(f"unknown text domain {domain!r}; allowed: {', '.join(TEMPLATES)}")
    digest = hashlib.sha256(f"{GENERATOR_VERSION}|{domain}|{seed}|{part}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return [_fill(rng.choice(TEMPLATES[domain]), rng) for _ in range(n)]


def load_tokenizer(name: str):
    """The Hugging Face tokenizer of `name` (see `tokenizer_path`), read from disk only."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_path(name)), local_files_only=True)


@dataclass
class Encoded:
    """Token ids of a corpus, right-padded with PAD: ids (N, T) and the vocabulary they index."""

    ids: Tensor
    vocab: list[int]  # vocab[i - 1] is the tokenizer's id of our id i (i >= 1)

    @property
    def digest(self) -> str:
        """SHA-256 of the ids and vocabulary: the data part of a stage's cache key."""
        h = hashlib.sha256(self.ids.numpy().tobytes())
        h.update(str(self.vocab).encode())
        return h.hexdigest()[:20]


def encode(texts: list[str], tokenizer, max_len: int, vocab: list[int] | None = None) -> Encoded:
    """Tokenize (no special tokens, truncated to max_len) and map tokenizer ids to 1..V of `vocab`.

    `vocab` None: the ids that occur in `texts` (a compact vocabulary). Ids outside a given vocabulary are an error.
    """
    rows = [tokenizer(t, add_special_tokens=False, truncation=True, max_length=max_len)["input_ids"] for t in texts]
    if vocab is None:
        vocab = sorted({i for r in rows for i in r})
    index = {tok: i + 1 for i, tok in enumerate(vocab)}
    ids = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
    for j, r in enumerate(rows):
        missing = [t for t in r if t not in index]
        if missing:
            raise ValueError(f"token id {missing[0]} of sample {j} is not in the vocabulary")
        ids[j, : len(r)] = torch.tensor([index[t] for t in r], dtype=torch.long)
    return Encoded(ids, vocab)


def tokens(enc: Encoded, row: int, tokenizer) -> list[str]:
    """The token strings of one encoded sample (padding dropped)."""
    ids = [enc.vocab[i - 1] for i in enc.ids[row].tolist() if i != PAD]
    return tokenizer.convert_ids_to_tokens(ids)
