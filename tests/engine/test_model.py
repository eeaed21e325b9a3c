"""The tiny model is made offline from a seed: the same bytes every time, a tokenizer that renders
the chat template, and the shapes vLLM's Llama loader expects. No vLLM needed: runs in `make
test`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jinja2
import numpy as np
from tokenizers import Tokenizer

from bench.engine import model


def _digests(directory: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
    }


def test_the_same_seed_makes_the_same_bytes_and_another_seed_other_weights(
    tmp_path: Path,
) -> None:
    first = model.ensure(seed=7, root=tmp_path / "a")
    again = model.ensure(seed=7, root=tmp_path / "b")
    other = model.ensure(seed=8, root=tmp_path / "c")
    assert first.built_s > 0
    assert again.built_s > 0
    assert _digests(first.path) == _digests(again.path)
    differs = {
        name
        for name, digest in _digests(other.path).items()
        if digest != _digests(first.path)[name]
    }
    assert differs == {"model.safetensors"}  # the tokenizer depends on the text only
    assert model.ensure(seed=7, root=tmp_path / "a").built_s == 0.0  # cached


def _bfloat16_tensors(path: Path) -> dict[str, np.ndarray]:
    """A bfloat16 safetensors file read by its format's definition, as float32 arrays."""
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__")
    tensors = {}
    for name, entry in header.items():
        assert entry["dtype"] == "BF16"
        start, end = entry["data_offsets"]
        bits = np.frombuffer(data[8 + length + start : 8 + length + end], dtype="<u2")
        tensors[name] = (bits.astype("<u4") << 16).view("<f4").reshape(entry["shape"])
    return tensors


def test_the_model_has_the_shapes_and_the_template_vllm_loads(tiny_model: model.Model) -> None:
    made = tiny_model
    config = json.loads((made.path / "config.json").read_text())
    assert config["max_position_embeddings"] == 2048
    weights = _bfloat16_tensors(made.path / "model.safetensors")
    assert sum(tensor.size for tensor in weights.values()) == model.parameters()
    assert weights["model.layers.0.self_attn.k_proj.weight"].shape == (64, 256)  # 2 KV heads
    assert 0.019 < float(weights["model.layers.0.mlp.up_proj.weight"].std()) < 0.021
    assert set(np.unique(weights["model.norm.weight"])) == {1.0}
    tokenizer = Tokenizer.from_file(str(made.path / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == model.VOCAB
    assert [tokenizer.token_to_id(token) for token in model.SPECIAL] == [0, 1, 2, 3]
    assert config["eos_token_id"] == tokenizer.token_to_id(model.END)
    template = json.loads((made.path / "tokenizer_config.json").read_text())["chat_template"]
    rendered = jinja2.Template(template).render(
        messages=[{"role": "user", "content": "four words a prompt"}], add_generation_prompt=True
    )
    assert rendered == "<|user|>\nfour words a prompt<|end|>\n<|assistant|>\n"
    ids = tokenizer.encode(rendered).ids
    assert ids[0] == tokenizer.token_to_id("<|user|>")
    assert tokenizer.decode(ids, skip_special_tokens=False) == rendered  # byte-level: lossless
