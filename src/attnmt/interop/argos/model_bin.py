"""CTranslate2's model.bin read by attnmt (a stranger's file: every count, length and size is
checked against the bytes there before anything is taken), and what a TransformerSpec in it says
about the model: layers, sizes, heads, norms, the attention layer, the weights as float32.

    found = read_model_bin(path)                 # a ModelBin, or CheckpointError naming the file
    found.spec, found.shape("encoder/embeddings_0/weight")
    arch = transformer_architecture(found, path)  # layers, d_model, heads, ff_dim, pre_norm, ...
    weight = found.tensor("decoder/projection/weight")  # (vocab, hidden) float32, int8 scales applied

The layout is CTranslate2's (python/ctranslate2/specs/model_spec.py, `_serialize`; binary
version 6): uint32 version, string spec name, uint32 revision, uint32 variable count, then each
variable (string name, uint8 rank, uint32 dims, uint8 dtype, uint32 byte count, bytes), then
uint32 alias count and (alias, variable) string pairs. A string is a uint16 length (with its
NUL) and the bytes.

Shapes:
    vocab: a vocabulary's tokens; hidden: d_model; ff_dim: the feed-forward size.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnmt.errors import CheckpointError

DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")  # CTranslate2's DataType enum order
_ITEMSIZE = (4, 1, 2, 4, 2, 2)
MAX_VARIABLES = 100_000
MAX_RANK = 4
MAX_VERSION = 6  # what CTranslate2 4.x writes and reads


@dataclass(frozen=True)
class Variable:
    dtype: str
    shape: tuple[int, ...]
    offset: int  # of its bytes in the file
    size: int


@dataclass
class ModelBin:
    path: Path
    version: int
    spec: str
    revision: int
    variables: dict[str, Variable]
    aliases: dict[str, str]
    data: bytes

    def resolve(self, name: str) -> str:
        return self.aliases.get(name, name)

    def has(self, name: str) -> bool:
        return self.resolve(name) in self.variables

    def shape(self, name: str) -> tuple[int, ...]:
        return self.variables[self.resolve(name)].shape

    def raw(self, name: str) -> np.ndarray:
        """The variable as stored (int8 weights as int8; bfloat16 widened to float32)."""
        var = self.variables[self.resolve(name)]
        chunk = self.data[var.offset:var.offset + var.size]
        if var.dtype == "bfloat16":
            wide = np.frombuffer(chunk, dtype="<u2").astype(np.uint32) << 16
            return wide.view(np.float32).reshape(var.shape)
        return np.frombuffer(chunk, dtype=np.dtype(var.dtype).newbyteorder("<")).reshape(var.shape)

    def scalar(self, name: str, default=None):
        if not self.has(name):
            return default
        value = self.raw(name)
        return value.reshape(-1)[0].item() if value.size == 1 else default

    def tensor(self, name: str) -> np.ndarray:
        """A weight as float32: an int8 / int16 weight divided by its `_scale` (CTranslate2's
        quantization: q = round(w x scale), one scale per output row)."""
        value = self.raw(name).astype(np.float32)
        scale_name = self.resolve(name) + "_scale"
        if self.variables[self.resolve(name)].dtype in ("int8", "int16") and scale_name in self.variables:
            scale = self.raw(scale_name).astype(np.float32)
            value = value / (scale.reshape(-1, *([1] * (value.ndim - 1))) if scale.ndim else scale)
        return value


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.path, self.at = data, path, 0

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: not a CTranslate2 model.bin: {what} (at byte {self.at})")

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise self.fail("it ends early")
        value = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value[0]

    def string(self) -> str:
        length = self.take("<H")
        if length < 1 or self.at + length > len(self.data) or self.data[self.at + length - 1] != 0:
            raise self.fail("a string without its end")
        try:
            text = self.data[self.at:self.at + length - 1].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("a name that is not UTF-8") from None
        self.at += length
        return text


def read_model_bin(path: Path, *, max_bytes: int = 4_000_000_000) -> ModelBin:
    """Parse `path` as CTranslate2's model.bin, checking every count and size against the file.

    Raises:
        CheckpointError: `path: not a CTranslate2 model.bin: ...`, naming what is wrong.
    """
    path = Path(path)
    if path.stat().st_size > max_bytes:
        raise CheckpointError(f"{path}: larger than {max_bytes:,} bytes")
    reader = _Reader(path.read_bytes(), path)
    version = reader.take("<I")
    if not 1 <= version <= MAX_VERSION:
        raise reader.fail(f"binary version {version} (CTranslate2 4 reads 1 to {MAX_VERSION})")
    spec = reader.string() if version >= 2 else ""
    revision = reader.take("<I") if version >= 2 else 1
    count = reader.take("<I")
    if count > MAX_VARIABLES:
        raise reader.fail(f"{count:,} variables")
    variables: dict[str, Variable] = {}
    for _ in range(count):
        name = reader.string()
        rank = reader.take("<B")
        if rank > MAX_RANK:
            raise reader.fail(f"{name}: rank {rank}")
        shape = tuple(reader.take("<I") for _ in range(rank))
        dtype_id = reader.take("<B")
        if dtype_id >= len(DTYPES):
            raise reader.fail(f"{name}: data type {dtype_id}")
        size = reader.take("<I")
        if size != int(np.prod(shape, dtype=np.int64)) * _ITEMSIZE[dtype_id]:
            raise reader.fail(f"{name}: {size} bytes for shape {shape} of {DTYPES[dtype_id]}")
        if reader.at + size > len(reader.data):
            raise reader.fail(f"{name}: its {size:,} bytes run past the end of the file")
        if name in variables:
            raise reader.fail(f"{name} is stored twice")
        variables[name] = Variable(DTYPES[dtype_id], shape, reader.at, size)
        reader.at += size
    aliases = {}
    if version >= 3:
        for _ in range(reader.take("<I") if reader.at < len(reader.data) else 0):
            alias, target = reader.string(), reader.string()
            if target not in variables:
                raise reader.fail(f"alias {alias} names {target}, which it does not hold")
            aliases[alias] = target
    if reader.at != len(reader.data):
        raise reader.fail(f"{len(reader.data) - reader.at} bytes after its last variable")
    return ModelBin(path, version, spec, revision, variables, aliases, reader.data)


def _count_layers(found: ModelBin, stack: str) -> int:
    layers = {int(m.group(1)) for name in [*found.variables, *found.aliases]
              if (m := re.match(rf"{stack}/layer_(\d+)/", name))}
    if layers != set(range(len(layers))):
        raise CheckpointError(f"{found.path}: {stack} layers {sorted(layers)} are not numbered 0 .. N-1")
    return len(layers)


def _embedding_scale(found: ModelBin, name: str, d_model: int) -> float:
    """scale_embeddings: a bool (True: sqrt(d_model), CTranslate2's converters) or the factor itself
    (attnmt's export)."""
    if not found.has(name):
        return float(np.sqrt(d_model))
    if found.variables[found.resolve(name)].dtype == "int8":
        return float(np.sqrt(d_model)) if found.scalar(name) else 1.0
    return float(found.scalar(name))


ACTIVATIONS = {0: "relu", 2: "swish", 3: "gelu"}  # CTranslate2's common_spec.Activation -> attnmt's


def transformer_architecture(found: ModelBin, where: Path) -> dict:
    """What a TransformerSpec's variables say: layers, d_model, heads, ff_dim, norms, activation,
    vocabulary sizes, the attention CTranslate2 returns, the embeddings' scale.

    Raises:
        CheckpointError: not a sequence-to-sequence Transformer, or one missing a part.
    """
    if found.spec != "TransformerSpec":
        raise CheckpointError(f"{where}: holds a CTranslate2 {found.spec or 'model of binary version 1'}; "
                              f"an Argos package holds a TransformerSpec (an encoder-decoder)")
    need = ["encoder/embeddings_0/weight", "decoder/embeddings/weight", "decoder/projection/weight",
            "encoder/layer_0/self_attention/linear_0/weight", "decoder/layer_0/attention/linear_0/weight",
            "encoder/layer_0/ffn/linear_0/weight"]
    missing = [name for name in need if not found.has(name)]
    if missing:
        raise CheckpointError(f"{where}: a TransformerSpec without {', '.join(missing)}")
    enc_layers, dec_layers = _count_layers(found, "encoder"), _count_layers(found, "decoder")
    src_vocab, d_model = found.shape("encoder/embeddings_0/weight")
    tgt_vocab = found.shape("decoder/embeddings/weight")[0]
    heads = found.scalar("encoder/num_heads", None) or found.scalar("num_heads", None)
    if not heads or d_model % int(heads):
        raise CheckpointError(f"{where}: num_heads={heads} does not divide d_model={d_model}")
    if found.shape("decoder/projection/weight") != (tgt_vocab, d_model):
        raise CheckpointError(f"{where}: decoder/projection/weight is {found.shape('decoder/projection/weight')}, "
                              f"not ({tgt_vocab}, {d_model})")
    activation = int(found.scalar("encoder/activation", 0))
    layer = found.scalar("decoder/alignment_layer", -1)
    return {
        "enc_layers": enc_layers, "dec_layers": dec_layers, "d_model": int(d_model), "heads": int(heads),
        "ff_dim": int(found.shape("encoder/layer_0/ffn/linear_0/weight")[0]),
        "src_vocab": int(src_vocab), "tgt_vocab": int(tgt_vocab),
        "pre_norm": bool(found.scalar("encoder/pre_norm", True)),
        "activation": ACTIVATIONS.get(activation, f"CTranslate2 activation {activation}"),
        "attention_layer": int(layer) % dec_layers, "attention_heads": int(found.scalar("decoder/alignment_heads", 1)),
        "scale_embeddings": _embedding_scale(found, "decoder/scale_embeddings", d_model),
        "quantization": found.variables[found.resolve("decoder/projection/weight")].dtype,
    }
