"""Arithmetic Task 2 (mixed addition and subtraction): expressions, programs, splits, and the op experts' step data.

An expression is a chain o_0 op_1 o_1 ... op_k o_k evaluated left to right (x_1 = o_0 op_1 o_1, x_s = x_{s-1} op_s o_s),
operands in [2, 50], every intermediate x_s and the answer in [2, 100] (an expression that leaves the range is drawn
again). The number of operations k follows a mix ("1:0.5,2:0.5"). Four phrasings, one of which names the operands
of the first step in the other order ("If you subtract 5 from 12 and add 9, what do you get?").

Each record carries the text, the answer, its range R1-R5, the number of steps, the program ("Step 1: 12 - 5 = x1"),
the symbolic form ("12-5+9", the same for every phrasing) and, for the step decomposer, the slot of each number in
text order: slot 0 is the left operand of step 1, slot s >= 1 the right operand of step s.

The definitions, as plain code (numpy only: the configs read them before torch loads); the frames are drawn in
`mixed_data.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .arithmetic import MAX_SUM, MIN_SUM, DatasetSpec, format_numbers

OPERAND_MIN, OPERAND_MAX = 2, 50
OPS = ("+", "-")
WORD = {"+": "plus", "-": "minus"}
VERB = {"+": "add", "-": "subtract"}
PHRASINGS = ("what", "bare", "compute", "if")
SPLITS = ("iid", "isolated")
MAX_STEPS = 4


def parse_mix(mix: str) -> dict[int, float]:
    """'1:0.5,2:0.5' -> {1: 0.5, 2: 0.5}: the share of expressions with each number of operations (sums to 1)."""
    try:
        out = {int(k): float(v) for k, v in (part.split(":") for part in mix.split(","))}
    except ValueError:
        raise ValueError(f"step mix must look like '1:0.5,2:0.5' (steps:share, comma-separated), got {mix!r}") from None
    if not out or any(not 1 <= k <= MAX_STEPS for k in out) or any(v < 0 for v in out.values()) \
            or abs(sum(out.values()) - 1) > 1e-6:
        raise ValueError(f"step mix {mix!r}: steps must be in [1, {MAX_STEPS}] and shares >= 0 summing to 1")
    return out


def phrase(operands: list[int], ops: str, phrasing: str) -> tuple[str, list[int]]:
    """The text of one expression in a phrasing, and the slot of each number in text order."""
    a, b, rest = operands[0], operands[1], list(zip(ops[1:], operands[2:]))
    chain = f"{a} {WORD[ops[0]]} {b}" + "".join(f" {WORD[op]} {o}" for op, o in rest)
    slots = list(range(len(operands)))
    if phrasing == "what":
        return f"What is {chain}?", slots
    if phrasing == "bare":
        return chain, slots
    if phrasing == "compute":
        return f"Compute {a} {WORD[ops[0]]} {b}" + "".join(f", then {VERB[op]} {o}" for op, o in rest) + ".", slots
    if phrasing == "if":  # names step 1's operands in the other order: "subtract b from a", "add b to a"
        first = f"subtract {b} from {a}" if ops[0] == "-" else f"add {b} to {a}"
        tail = "".join(f" and {VERB[op]} {o}" for op, o in rest)
        return f"If you {first}{tail}, what do you get?", [1, 0, *slots[2:]]
    raise ValueError(f"unknown phrasing {phrasing!r}; allowed: {', '.join(PHRASINGS)}")


def program_text(operands: list[int], ops: str) -> str:
    """The program of an expression, one step per line: 'Step 1: 33 + 23 = x1', 'Step 2: x1 - 36 = x2'."""
    lines, left = [], str(operands[0])
    for s, (op, o) in enumerate(zip(ops, operands[1:]), start=1):
        lines.append(f"Step {s}: {left} {op} {o} = x{s}")
        left = f"x{s}"
    return "\n".join(lines)


def evaluate(operands: list[int], ops: str) -> list[int]:
    """Every intermediate x_1..x_k of a chain, left to right."""
    values, x = [], operands[0]
    for op, o in zip(ops, operands[1:]):
        x = x + o if op == "+" else x - o
        values.append(x)
    return values


@dataclass(frozen=True, kw_only=True)
class Task2Spec(DatasetSpec):
    """What determines a Task 2 dataset: the step mix and phrasings, with the sizes, split, number format and seed."""

    step_mix: str = "1:0.5,2:0.5"
    n_phrasings: int = len(PHRASINGS)

    SPLITS: ClassVar[tuple[str, ...]] = SPLITS

    def __post_init__(self):
        parse_mix(self.step_mix)
        super().__post_init__()
        if not 1 <= self.n_phrasings <= len(PHRASINGS):
            raise ValueError(f"n_phrasings must be in [1, {len(PHRASINGS)}], got {self.n_phrasings}")


def sample_chain(rng: np.random.Generator, k: int) -> tuple[list[int], str]:
    """Operands and operators of one k-step chain whose intermediates and answer all lie in [2, 100]."""
    while True:
        operands = rng.integers(OPERAND_MIN, OPERAND_MAX + 1, k + 1).tolist()
        ops = "".join(rng.choice(OPS, k))
        if all(MIN_SUM <= x <= MAX_SUM for x in evaluate(operands, ops)):
            return operands, ops


def step_text(left: int, op: str, right: int, number_format: str = "whole") -> str:
    """The text an op expert reads for one step: 'a + b' or 'a - b'."""
    return format_numbers(f"{left} {op} {right}", number_format)
