"""benchmarks/speed/ceiling.py: the multiply-adds it counts on a model equal a count written out by
hand from the config; the matrix shapes it records are the ones a decoder step multiplies by; the
limit is their ratio."""

import pytest
import torch

from attnmt.models.rnn import RNNSeq2Seq
from attnmt.models.transformer import TransformerSeq2Seq
from benchmarks.speed.ceiling import (
    DecodeMacs,
    decode_macs,
    gemm_throughput,
    limit_tokens_per_s,
    product_throughput,
    step_shapes,
    train_work,
)

D, FF, LAYERS, HEADS, VOCAB = 32, 64, 2, 4, 50


def transformer():
    torch.manual_seed(0)
    return TransformerSeq2Seq(VOCAB, VOCAB, d_model=D, heads=HEADS, ff_dim=FF, enc_layers=LAYERS, dec_layers=LAYERS)


def test_transformer_macs_equal_a_count_by_hand():
    src_len, out_len = 9, 10
    macs = decode_macs(transformer(), src_len=src_len, out_len=out_len)
    # One step of one hypothesis. Attention that runs in torch's SDPA kernel (self-attention, the
    # encoder's) is not counted by FlopCounterMode on a CPU; cross-attention, which returns its
    # weights, runs the math path and is.
    per_layer = (4 * D * D      # self-attention q, k, v, out projections
                 + 2 * D * D    # cross-attention q and out (its keys and values are the encoder's, cached)
                 + 2 * D * FF   # feed-forward
                 + 2 * src_len * D)  # cross-attention scores and context over the source
    assert macs.step_per_hypothesis == LAYERS * per_layer + D * VOCAB  # + the output layer
    # per source token: each encoder layer's 4 projections and feed-forward, and each decoder
    # layer's cross-attention keys and values
    encoder = LAYERS * (4 * D * D + 2 * D * FF) + LAYERS * 2 * D * D
    assert macs.encoder_per_src_token == pytest.approx(encoder)


def test_per_output_token_and_limit():
    macs = DecodeMacs(step_per_hypothesis=100.0, encoder_per_src_token=40.0, src_len=10.0, out_len=4.0)
    assert macs.per_output_token(1) == (100 * 5 + 40 * 10) / 4  # 5 steps (4 tokens + eos), the encoder once
    assert macs.per_output_token(5) == (5 * 100 * 5 + 40 * 10) / 4
    assert limit_tokens_per_s(macs, 2.0, beam=1) == pytest.approx(2e9 / 225)


@pytest.mark.parametrize("model", ["transformer", "rnn"])
def test_step_shapes_are_the_matrices_of_one_step(model):
    if model == "transformer":
        shapes = step_shapes(transformer())
        # per layer: self q, k, v in one product (attention.py project_qkv), self out; cross q,
        # out; the two feed-forward layers; then the output layer
        assert shapes[-1] == (D, VOCAB)
        assert sorted(shapes) == sorted(LAYERS * ([(D, 3 * D)] + [(D, D)] * 3 + [(D, FF), (FF, D)])
                                        + [(D, VOCAB)])
    else:
        torch.manual_seed(0)
        shapes = step_shapes(RNNSeq2Seq(VOCAB, VOCAB, emb_dim=8, enc_hidden=12, dec_hidden=16, attn_dim=10))
        assert (16, 48) in shapes and shapes[-1][1] == VOCAB  # the GRU cell's hidden gates; the output layer


def test_gemm_throughput_reports_positive_rates_for_the_work_it_did():
    report = gemm_throughput([(16, 32), (32, 8)], rows=4, repeats=3)
    assert report["macs"] == 4 * (16 * 32 + 32 * 8)
    assert report["fp32_gmac_per_s"] > 0 and report["int8_gmac_per_s"] > 0


class _Batch:
    def __init__(self, rows):
        self.x, self.num_tgt_tokens = torch.randn(rows, 4), rows


def test_train_work_counts_forward_and_backward_by_hand():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        optimizer.zero_grad()
        model(batch.x).square().sum().backward()
        optimizer.step()

    work = train_work(step, [_Batch(5), _Batch(7)])
    # per row: forward 4*8 + 8*3; backward: the second layer's input and weight gradients 2 * 8*3,
    # the first layer's weight gradient 4*8 (its input needs no gradient)
    per_row = (4 * 8 + 8 * 3) + 2 * 8 * 3 + 4 * 8
    assert work.macs_per_tgt_token == per_row
    assert sum(m * k * n for m, k, n in work.shapes) == per_row * 12  # the recorded products hold that work
    report = product_throughput(work.shapes, repeats=2)
    assert report["macs"] == per_row * 12 and report["products"] == len(work.shapes) and report["fp32_gmac_per_s"] > 0
