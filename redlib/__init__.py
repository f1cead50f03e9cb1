"""redlib: the library behind the RED paper companion (pipeline, experiments, book pages, bench)."""

import warnings

__version__ = "0.1.0"

# Inside a notebook kernel without ipywidgets, importing tqdm.auto (transformers does) warns with the install's
# path on every page; the bars are plain text there by design.
warnings.filterwarnings("ignore", message="IProgress not found")
