"""redlib: the library behind the RED paper companion (pipeline, experiments, book pages, bench)."""

import os
import warnings

__version__ = "0.1.0"

# oneDNN's instruction set, capped below AMX before torch starts oneDNN (it reads this once): on CPUs with AMX the
# oneDNN fp32 matmul path of `speed/kernels.py` (REDLIB_MATMUL=fast there) would otherwise compute in bf16. A value
# the reader sets wins.
ONEDNN_ISA_CAP = "AVX512_CORE_BF16"
if not (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")):
    os.environ["ONEDNN_MAX_CPU_ISA"] = ONEDNN_ISA_CAP

# Inside a notebook kernel without ipywidgets, importing tqdm.auto (transformers does) warns with the install's
# path on every page; the bars are plain text there by design.
warnings.filterwarnings("ignore", message="IProgress not found")
