"""The tiny model vLLM serves here: made offline, in seconds, the same bytes for the same seed.

There is no Hugging Face hub on these machines, so the model is made rather than downloaded: a
byte-level BPE tokenizer (16,384 tokens) trained with ``tokenizers`` on text every CPython
installation carries — the documentation topics of ``pydoc_data`` and the standard library's
top-level modules, read in sorted order — and a ``LlamaForCausalLM`` (hidden 256, 8 layers, 8
query heads sharing 2 key/value heads, ~14 M parameters, bfloat16) whose weights are drawn from
numpy's PCG64 with the seed. Random weights say nothing; with ``ignore_eos`` every stream is exactly
``max_tokens`` long, which is what a load generator needs to count. The compute per token is a real
transformer's: prefill grows with the prompt, decode batches, the prefix cache hits.

The same seed gives the same bytes on every machine with the same Python, ``tokenizers`` and numpy
(the training text is the interpreter's own, and BPE training is deterministic); the cache
directory's name carries all four, so a change of any makes a new model instead of reusing a
different one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.engine.errors import EngineRefused

VOCAB = 16_384
HIDDEN = 256
LAYERS = 8
HEADS = 8
KV_HEADS = 2  # grouped-query attention, as the engines' real models
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 768
MAX_CONTEXT = 2_048
INIT_STD = 0.02
DISK_NEEDED = 32 << 20  # 29 MB of bfloat16 weights, the tokenizer and the config
FORMAT = "bf16-safetensors"  # in the cache key: a cached model of another format is not reused

END = "<|end|>"
SPECIAL = (END, "<|system|>", "<|user|>", "<|assistant|>")
# One role marker and one END a message; add_generation_prompt opens the assistant's turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
NAME = "ramplab-tiny-llama"


@dataclass(frozen=True)
class Model:
    """A model directory vLLM can load with ``--model``."""

    path: Path
    name: str  # the served model name
    seed: int
    built_s: float  # 0.0 when it came from the cache


def cache_root() -> Path:
    configured = os.environ.get("RAMPLAB_ENGINE_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "ramplab" / "engine"


def key(seed: int) -> str:
    import tokenizers

    spec = "\n".join(
        [sys.version, tokenizers.__version__, np.__version__, str(seed), FORMAT, CHAT_TEMPLATE]
        + [str(v) for v in (VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, INTERMEDIATE, MAX_CONTEXT)]
    )
    return hashlib.sha256(spec.encode()).hexdigest()[:12]


def ensure(seed: int = 0, root: Path | None = None) -> Model:
    """The model for ``seed``, built into the cache when it holds none."""
    directory = (root or cache_root()) / f"model-{seed}-{key(seed)}"
    if (directory / "model.safetensors").exists():
        return Model(directory, NAME, seed, 0.0)
    directory.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # Built beside its final place and renamed into it: a reader never sees half a model, and two
    # builders racing both write the same bytes.
    scratch = Path(tempfile.mkdtemp(prefix=".model-", dir=directory.parent))
    try:
        write(scratch, seed)
        try:
            scratch.rename(directory)
        except OSError:
            if not (directory / "model.safetensors").exists():
                raise
    except OSError as failed:
        if failed.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise EngineRefused(
            f"not enough disk for the model: {directory.parent} is full ({failed.strerror}), "
            f"it needs about {DISK_NEEDED >> 20} MiB (set RAMPLAB_ENGINE_CACHE to a larger disk)"
        ) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Model(directory, NAME, seed, time.monotonic() - started)


def write(directory: Path, seed: int) -> None:
    """Every file of the model into ``directory``."""
    _write_tokenizer(directory)
    _write_config(directory)
    _write_weights(directory, seed)


def corpus() -> list[str]:
    """The training text: what every installation of this Python holds, in a fixed order."""
    from pydoc_data import topics

    texts = [topics.topics[name] for name in sorted(topics.topics)]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for source in sorted(stdlib.glob("*.py")):
        texts.append(source.read_text(encoding="utf-8", errors="replace"))
    return texts


def _write_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        min_frequency=2,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    # Written by Python, not by tokenizers' save: its errors are a bare Exception, a full disk
    # included; the same bytes either way.
    (directory / "tokenizer.json").write_text(tokenizer.to_str(pretty=True), encoding="utf-8")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": END,
        "pad_token": END,
        "model_max_length": MAX_CONTEXT,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    special = {"eos_token": END, "pad_token": END}
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=1) + "\n")


def _write_config(directory: Path) -> None:
    end_id = SPECIAL.index(END)  # special tokens take the first ids, in order
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_CONTEXT,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10_000.0,
        "tie_word_embeddings": False,
        "bos_token_id": end_id,
        "eos_token_id": end_id,
        "torch_dtype": "bfloat16",
    }
    (directory / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    generation = {"bos_token_id": end_id, "eos_token_id": end_id}
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=1) + "\n")


def _shapes() -> dict[str, tuple[int, ...]]:
    kv = KV_HEADS * HEAD_DIM
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (VOCAB, HIDDEN)}
    for layer in range(LAYERS):
        prefix = f"model.layers.{layer}"
        shapes[f"{prefix}.input_layernorm.weight"] = (HIDDEN,)
        shapes[f"{prefix}.self_attn.q_proj.weight"] = (HEADS * HEAD_DIM, HIDDEN)
        shapes[f"{prefix}.self_attn.k_proj.weight"] = (kv, HIDDEN)
        shapes[f"{prefix}.self_attn.v_proj.weight"] = (kv, HIDDEN)
        shapes[f"{prefix}.self_attn.o_proj.weight"] = (HIDDEN, HEADS * HEAD_DIM)
        shapes[f"{prefix}.post_attention_layernorm.weight"] = (HIDDEN,)
        shapes[f"{prefix}.mlp.gate_proj.weight"] = (INTERMEDIATE, HIDDEN)
        shapes[f"{prefix}.mlp.up_proj.weight"] = (INTERMEDIATE, HIDDEN)
        shapes[f"{prefix}.mlp.down_proj.weight"] = (HIDDEN, INTERMEDIATE)
    shapes["model.norm.weight"] = (HIDDEN,)
    shapes["lm_head.weight"] = (VOCAB, HIDDEN)
    return shapes


def parameters() -> int:
    return sum(int(np.prod(shape)) for shape in _shapes().values())


def _write_weights(directory: Path, seed: int) -> None:
    rng = np.random.Generator(np.random.PCG64(seed))
    tensors: dict[str, np.ndarray] = {}
    for name, shape in _shapes().items():  # insertion order: the draws never change places
        if name.endswith("norm.weight"):
            tensors[name] = np.ones(shape, dtype=np.float32)
        else:
            tensors[name] = rng.standard_normal(shape, dtype=np.float32) * np.float32(INIT_STD)
    write_safetensors(directory / "model.safetensors", tensors)


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """float32 arrays as a bfloat16 safetensors file, the dtype vLLM serves on this CPU.

    Written by hand: the ``safetensors`` package cannot write bfloat16 from numpy, and the format
    is an 8-byte header length, a JSON header and the tensors' bytes back to back.
    """
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, array in tensors.items():
        blob = _bfloat16(array).tobytes()
        header[name] = {
            "dtype": "BF16",
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the tensors start 8-byte aligned
    with path.open("wb") as out:
        out.write(len(encoded).to_bytes(8, "little"))
        out.write(encoded)
        for blob in blobs:
            out.write(blob)


def _bfloat16(array: np.ndarray) -> np.ndarray:
    """The upper 16 bits of each float32, rounded to nearest even (no NaN or infinity here)."""
    bits = np.ascontiguousarray(array, dtype="<f4").view("<u4")
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return rounded.astype("<u2")
