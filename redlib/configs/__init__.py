"""Each page's knobs, one module named as its notebook (no torch: a rejected parameter answers before torch loads)."""
