"""The tutorial-style references of benchmarks/references/: the right shapes, they learn, and
holding attnmt's weights they give attnmt's logits and greedy translations, with the same
parameter count as attnmt's model of each shipped config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from attnmt.config import Config
from attnmt.data.batching import make_batches
from benchmarks.references import reference_rnn, reference_transformer
from benchmarks.speed.bench import reference_module
from benchmarks.speed.train_speed import make_reference_step


def _toy_batch(batch: int = 6, vocab: int = 12, seed: int = 0):
    """One padded batch of a copy task: target = source (ids >= 4, lengths 3..7)."""
    gen = torch.Generator().manual_seed(seed)
    examples = []
    for i in range(batch):
        ids = torch.randint(4, vocab, (3 + i % 5,), generator=gen).tolist()
        examples.append((ids, ids))
    return make_batches(examples, batch_size=batch, shuffle=False)[0]


def _tiny_rnn():
    torch.manual_seed(0)
    return reference_rnn.ReferenceRNN(12, 12, emb_dim=8, enc_hidden=8, dec_hidden=16, attn_dim=8, dropout=0.0)


def _tiny_transformer():
    torch.manual_seed(0)
    return reference_transformer.ReferenceTransformer(12, 12, d_model=16, heads=2, ff_dim=32, enc_layers=1,
                                                      dec_layers=1, dropout=0.0)


@pytest.mark.parametrize("make", [_tiny_rnn, _tiny_transformer], ids=["rnn", "transformer"])
def test_reference_forward_shape(make):
    model, batch = make(), _toy_batch()
    src, tgt_in = batch.src_ids.t(), batch.tgt_in.t()  # (src_len, batch), (tgt_len, batch)
    logits = model(src, tgt_in, 1.0)
    assert logits.shape == (tgt_in.shape[0], tgt_in.shape[1], 12)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("make", [_tiny_rnn, _tiny_transformer], ids=["rnn", "transformer"])
def test_reference_trains(make):
    model, batch = make(), _toy_batch()
    cfg = Config().replace(train=dataclasses.replace(Config().train, lr=1e-2, teacher_forcing=1.0))
    step = make_reference_step(model.train(), cfg, torch.device("cpu"), pad_id=0)
    losses = [step(batch) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("ref,make", [(reference_rnn, _tiny_rnn), (reference_transformer, _tiny_transformer)],
                         ids=["rnn", "transformer"])
def test_reference_decoding_shapes(ref, make):
    model, batch = make().eval(), _toy_batch()
    src = batch.src_ids.t()  # (src_len, batch)
    out = ref.greedy_decode(model, src, 9, bos_id=2)
    assert out.shape == (9, src.shape[1])
    hyp = ref.beam_search_one(model, src[:, :1][: int(batch.src_lengths[0])], beam_size=3, max_len=9,
                              bos_id=2, eos_id=3)
    assert len(hyp) <= 9 and all(isinstance(t, int) and t != 3 for t in hyp)


# ----------------------------------------------------------------------------- same weights, same model


def _attnmt_rnn(**kw):
    from attnmt.models.rnn import RNNSeq2Seq

    torch.manual_seed(0)
    return RNNSeq2Seq(12, 14, emb_dim=8, enc_hidden=6, dec_hidden=10, attn_dim=7, dropout=0.0, **kw).double().eval()


def _attnmt_transformer(*, pre_norm=True, share=True, tie=True, vocab=(15, 15)):
    from attnmt.models.transformer import TransformerSeq2Seq

    torch.manual_seed(0)
    model = TransformerSeq2Seq(*vocab, d_model=16, heads=2, ff_dim=24, enc_layers=2, dec_layers=2, dropout=0.0,
                               pre_norm=pre_norm, share_embeddings=share, tie_embeddings=tie)
    with torch.no_grad():  # attnmt zeroes the biases at init: make them count in the comparison
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0, 0.1)
    return model.double().eval()


def _sources(lengths, vocab=12, seed=3):
    """Random ids >= 4, padded: src_ids (batch, src_len), mask, lengths."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    mask = torch.arange(int(lengths.max())) < lengths[:, None]  # (batch, src_len)
    return torch.randint(4, vocab, mask.shape, generator=gen).masked_fill(~mask, 0), mask, lengths


def test_rnn_reference_from_attnmt_has_the_same_logits():
    """Same weights -> same logits on a padded batch, same parameter count."""
    from attnmt.models import count_parameters

    model = _attnmt_rnn()
    ref = reference_rnn.from_attnmt(model).double().eval()
    assert count_parameters(ref) == count_parameters(model)
    src_ids, src_mask, lengths = _sources([6, 2, 4])
    tgt_in = torch.randint(4, 14, (3, 5), generator=torch.Generator().manual_seed(4))
    tgt_in[:, 0] = 2
    with torch.no_grad():
        expected = model(src_ids, src_mask, lengths, tgt_in).logits  # (batch, tgt_len, vocab)
        got = ref(src_ids.t(), tgt_in.t(), 1.0).transpose(0, 1)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="Bahdanau attention, 1 encoder layer and an untied output"):
        reference_rnn.from_attnmt(_attnmt_rnn(attention="luong-general"))


@pytest.mark.parametrize("pre_norm,share,tie", [(True, True, True), (False, False, False), (True, False, True)])
def test_transformer_reference_from_attnmt_has_the_same_logits(pre_norm, share, tie):
    """Same weights -> same logits on a padded batch (real target positions), same parameters."""
    from attnmt.models import count_parameters

    model = _attnmt_transformer(pre_norm=pre_norm, share=share, tie=tie, vocab=(15, 15) if share else (13, 15))
    ref = reference_transformer.from_attnmt(model).double().eval()
    assert count_parameters(ref) == count_parameters(model)
    assert (ref.tgt_tok_emb is ref.src_tok_emb) == share
    assert (ref.generator.weight is ref.tgt_tok_emb.weight) == tie
    src_ids, src_mask, lengths = _sources([7, 3, 5])
    tgt_in = torch.randint(4, 15, (3, 6), generator=torch.Generator().manual_seed(4))
    tgt_in[:, 0] = 2
    tgt_in[1, 4:] = 0  # padding
    with torch.no_grad():
        expected = model(src_ids, src_mask, lengths, tgt_in).logits  # (batch, tgt_len, vocab)
        got = ref(src_ids.t(), tgt_in.t(), 1.0).transpose(0, 1)
    real = tgt_in != 0
    torch.testing.assert_close(got[real], expected[real], rtol=1e-6, atol=1e-6)


def test_transformer_reference_greedy_equals_attnmt_greedy():
    """Same weights -> the same greedy translations, each searched to the same budget."""
    from attnmt.decoding.search import greedy_search

    model = _attnmt_transformer()
    ref = reference_transformer.from_attnmt(model).double().eval()
    src_ids, src_mask, lengths = _sources([7, 3, 5])
    found = greedy_search(model, src_ids, src_mask, lengths, max_len_ratio=0.0, max_len_offset=9, bos_id=2,
                          eos_id=3)
    rows = reference_transformer.greedy_decode(ref, src_ids.t(), 9, bos_id=2, eos_id=3).t().tolist()
    assert [row[: row.index(3)] if 3 in row else row for row in rows] == found.tokens


@pytest.mark.parametrize("config", ["quickstart_rnn.yaml", "multi30k_rnn.yaml", "multi30k_transformer.yaml"])
def test_reference_built_from_a_config_has_attnmt_parameter_count(config):
    """Training throughput compares models of one size: build_reference matches build_model."""
    from attnmt.config import load_config
    from attnmt.models import build_model, count_parameters

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / config)
    attnmt_model = build_model(cfg.model, 300, 300)
    ref = reference_module(cfg.model.arch).build_reference(cfg.model, 300, 300)
    assert count_parameters(ref) == count_parameters(attnmt_model)
