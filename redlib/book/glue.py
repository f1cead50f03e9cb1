"""Values for a page's prose: each page's conclusions are MyST text in its notebook, and the numbers and verdicts
in them are glued here from the run and pasted with {glue:text}`key:.3f` (myst-nb renders them from the stored
outputs, so no sentence states a number by hand)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def plain(value: object) -> object:
    """A glued value as myst-nb can read it back: a Python number, a string (numpy scalars unwrapped), or Markdown
    (pasted with {glue:md}, for text holding code such as a command)."""
    from IPython.display import Markdown

    if isinstance(value, Markdown):
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return str(value)
    return value


def glue_values(values: Mapping[str, object]) -> None:
    """Glue every value (without displaying it) under its key, for {glue:text} roles in the page's prose."""
    from myst_nb import glue

    for key, value in values.items():
        glue(key, plain(value), display=False)
