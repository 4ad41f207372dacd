"""The machine's limit for decoding a model, and a measured speed as a share of it.

    macs = decode_macs(model, src_len=13.0, out_len=13.5)        # multiply-adds the model needs
    gemm = gemm_throughput(step_shapes(model), rows=64 * 5)       # GMAC/s at the model's own shapes
    limit = limit_tokens_per_s(macs, gemm, beam=5)                # output tokens/s if decoding were only that

    work = train_work(step, batches)                              # training: multiply-adds per target token
    gemm = product_throughput(work.shapes)                        # GMAC/s at the steps' own products
    limit = gemm["fp32_gmac_per_s"] * 1e9 / work.macs_per_tgt_token  # target tokens/s if training were only that

Multiply-adds are counted by torch's FlopCounterMode on the model itself (one `encode` of a
sentence, one `decode_step` of one hypothesis), so they follow any config: per hypothesis and step
(the decoder's projections, feed-forward, attention and output layer) and per source token (the
encoder, and the Transformer's cross-attention keys and values, computed once). On a CPU the
counter does not see attention that runs in torch's SDPA kernel (the Transformer's self-attention
and encoder): a few percent at Multi30k's lengths, so the limit is a little generous. An output token
costs `beam` decoder steps plus its share of the encoder and of the step that emits eos:
`(beam * step * (out_len + 1) + encoder * src_len) / out_len`.

Throughput is timed with torch on this machine at the model's own matrix shapes: every matrix
product of one real decoder step (recorded as it runs) applied to `rows` rows (the batch times
the beam), fp32 with
`torch.nn.functional.linear` and int8 with torch's dynamic quantization (what CTranslate2's int8
GEMMs compete with); the figure is their summed multiply-adds over their summed time. The limit
ignores everything that is not a matrix product (softmax, top-k, copies, Python), which is what
the share then shows.

Training is counted the same way: the multiply-adds of whole update steps (forward and backward,
as FlopCounterMode sees them; the optimizer's element-wise work is not a matrix product) over
their target tokens, against torch's fp32 `mm` throughput at every matrix product those very
steps ran (forward and backward, recorded with their shapes). fp32 only: training does not
quantize.

Shapes:
    m, k, n: a matrix product (m, k) @ (k, n), in training; its multiply-adds are m * k * n.
    rows: batch * beam, the rows each decoder step multiplies; in_dim, out_dim: a layer's sizes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode


@dataclass(frozen=True)
class DecodeMacs:
    step_per_hypothesis: float   # multiply-adds of one decode_step for one hypothesis
    encoder_per_src_token: float  # multiply-adds of encode (+ init_state) per source token
    src_len: float               # mean source length (tokens) the figures assume
    out_len: float               # mean output length (tokens, without eos)

    def per_output_token(self, beam: int) -> float:
        """A sentence's multiply-adds over its output tokens: (out_len + 1) steps of `beam`
        hypotheses (the last one emits eos) plus the encoder over its source."""
        steps = beam * self.step_per_hypothesis * (self.out_len + 1)
        return (steps + self.encoder_per_src_token * self.src_len) / self.out_len


def _macs(fn) -> float:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() / 2


@torch.inference_mode()
def decode_macs(model: nn.Module, *, src_len: float, out_len: float, bos_id: int = 2) -> DecodeMacs:
    """Multiply-adds of `model` per decoder step and per source token, counted on the model."""
    model.eval()
    n = max(1, round(src_len))
    src_ids = torch.full((1, n), 4, dtype=torch.long)  # (batch=1, src_len)
    src_mask = torch.ones(1, n, dtype=torch.bool)
    src_lengths = torch.tensor([n])
    box = {}
    encoder = _macs(lambda: box.update(state=model.init_state(model.encode(src_ids, src_mask, src_lengths))))
    prev = torch.tensor([bos_id])
    state = box["state"]
    for _ in range(max(0, round(out_len / 2) - 1)):  # a step from the middle of a typical output
        _, state, _ = model.decode_step(prev, state)
    step = _macs(lambda: model.decode_step(prev, state))
    return DecodeMacs(step, encoder / n, float(src_len), float(out_len))


class _MatrixShapes(TorchDispatchMode):
    """Records (in_dim, out_dim) of every matrix product (mm, addmm) run inside it."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func is aten.linear.default:  # weight (out_dim, in_dim)
            self.shapes.append((args[1].shape[1], args[1].shape[0]))
        elif func is aten.addmm.default:
            self.shapes.append((args[1].shape[1], args[2].shape[1]))
        elif func is aten.mm.default:
            self.shapes.append((args[0].shape[1], args[1].shape[1]))
        elif func is aten.gru_cell.default:  # w_ih (3 hidden, in_dim), w_hh (3 hidden, hidden)
            self.shapes += [(args[2].shape[1], args[2].shape[0]), (args[3].shape[1], args[3].shape[0])]
        return func(*args, **(kwargs or {}))


@torch.inference_mode()
def step_shapes(model: nn.Module, *, src_len: int = 13, bos_id: int = 2) -> list[tuple[int, int]]:
    """(in_dim, out_dim) of every matrix one decoder step multiplies by, read off a real step (the
    Transformer's cross-attention keys and values, computed once per sentence, are not among them)."""
    model.eval()
    src_ids = torch.full((1, src_len), 4, dtype=torch.long)
    state = model.init_state(model.encode(src_ids, torch.ones(1, src_len, dtype=torch.bool), torch.tensor([src_len])))
    prev = torch.tensor([bos_id])
    _, state, _ = model.decode_step(prev, state)
    with _MatrixShapes() as recorder:
        model.decode_step(prev, state)
    return recorder.shapes


def _median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


@torch.inference_mode()
def gemm_throughput(shapes: list[tuple[int, int]], *, rows: int, repeats: int = 20) -> dict:
    """GMAC/s of torch at these layer shapes on `rows` rows, fp32 and int8 (dynamic quantization)."""
    torch.manual_seed(0)
    layers = nn.ModuleList(nn.Linear(i, o) for i, o in shapes).eval()
    quantized = torch.ao.quantization.quantize_dynamic(layers, {nn.Linear}, dtype=torch.qint8)
    inputs = [torch.randn(rows, i) for i, _ in shapes]  # (rows, in_dim) each
    macs = sum(rows * i * o for i, o in shapes)

    def run(stack):
        for layer, x in zip(stack, inputs):
            layer(x)

    return {"rows": rows, "macs": macs,
            "fp32_gmac_per_s": round(macs / _median_seconds(lambda: run(layers), repeats) / 1e9, 2),
            "int8_gmac_per_s": round(macs / _median_seconds(lambda: run(quantized), repeats) / 1e9, 2)}


def limit_tokens_per_s(macs: DecodeMacs, gmac_per_s: float, *, beam: int) -> float:
    """Output tokens/s if decoding did nothing but its multiply-adds at `gmac_per_s`."""
    return gmac_per_s * 1e9 / macs.per_output_token(beam)


# ----------------------------------------------------------------------------- training

class _ProductShapes(TorchDispatchMode):
    """Records (m, k, n) of every matrix product (m, k) @ (k, n) run inside it, forward and
    backward; a batched product counts as its batch times m rows."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func is aten.mm.default:
            self.shapes.append((args[0].shape[0], args[0].shape[1], args[1].shape[1]))
        elif func is aten.addmm.default:
            self.shapes.append((args[1].shape[0], args[1].shape[1], args[2].shape[1]))
        elif func is aten.bmm.default:
            b, m, k = args[0].shape
            self.shapes.append((b * m, k, args[1].shape[2]))
        return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class TrainWork:
    macs_per_tgt_token: float              # multiply-adds of whole steps over their target tokens
    shapes: list[tuple[int, int, int]]     # (m, k, n) of every matrix product of those steps


def train_work(step, batches) -> TrainWork:
    """What whole training steps cost: `step(batch)` runs one update (it changes the model, so
    call this after timing) on batches with `num_tgt_tokens`. Multiply-adds are FlopCounterMode's
    count; the shapes are recorded from the same steps."""
    macs, shapes = 0.0, []
    for batch in batches:
        with _ProductShapes() as recorder:
            macs += _macs(lambda b=batch: step(b))
        shapes += recorder.shapes
    return TrainWork(macs / sum(batch.num_tgt_tokens for batch in batches), shapes)


def product_throughput(shapes: list[tuple[int, int, int]], *, repeats: int = 5) -> dict:
    """GMAC/s of torch's fp32 `mm` at these (m, k, n), all of them, summed work over summed time."""
    torch.manual_seed(0)
    pairs = [(torch.randn(m, k), torch.randn(k, n)) for m, k, n in shapes]
    macs = sum(m * k * n for m, k, n in shapes)

    def run():
        for a, b in pairs:
            torch.mm(a, b)

    return {"products": len(shapes), "macs": macs,
            "fp32_gmac_per_s": round(macs / _median_seconds(run, repeats) / 1e9, 2)}
