"""The Transformer's decoding: the preallocated self-attention cache (filled in place, grown by
doubling, gathered by reorder_state) and the fused q, k, v projection. Every search through them
gives the outputs of a decoder with no cache at all (the reference below re-runs the public
``forward`` over the whole prefix at every step), token for token, with scores and attention to
float64 rounding; checkpoints keep the three projections' parameters."""

import pytest
import torch
from torch import Tensor, nn

from attnmt.checkpoint import load_weights, load_weights_file, save_weights
from attnmt.decoding.constraints import constrained_beam_search, constraint_batch
from attnmt.models.transformer import CACHE_START, TransformerSeq2Seq
from attnmt.decoding.search import beam_search, greedy_search

from support.toy import padded_batch

VOCAB, BOS, EOS = 16, 2, 3  # toy.padded_batch draws source ids below 11


class Recomputing(nn.Module):
    """The search interface over ``model.forward``: no cache, each step decodes the whole prefix."""

    def __init__(self, model: TransformerSeq2Seq):
        super().__init__()
        self.model = model

    def encode(self, src_ids, src_mask, src_lengths):
        return src_ids, src_mask, src_lengths

    def init_state(self, enc):
        src_ids, src_mask, src_lengths = enc
        return {"src_ids": src_ids, "src_mask": src_mask, "src_lengths": src_lengths,
                "tgt_in": src_ids.new_zeros(src_ids.shape[0], 0)}

    def decode_step(self, prev_ids: Tensor, state):
        tgt_in = torch.cat([state["tgt_in"], prev_ids[:, None]], dim=1)  # (batch, t + 1)
        out = self.model(state["src_ids"], state["src_mask"], state["src_lengths"], tgt_in,
                         need_attention=True)
        return out.logits[:, -1], {**state, "tgt_in": tgt_in}, out.attention[:, -1]

    def reorder_state(self, state, index, *, within_sentences=False):
        return {name: value.index_select(0, index) for name, value in state.items()}


def toy_transformer(seed: int, *, never_eos: bool = False) -> TransformerSeq2Seq:
    """Untrained, float64 (no near-ties flipped by summation order); never_eos: every output runs
    to its budget, past the cache's first buffer."""
    torch.manual_seed(seed)
    model = TransformerSeq2Seq(VOCAB, VOCAB, d_model=16, heads=4, ff_dim=32, enc_layers=1,
                               dec_layers=2, dropout=0.0).double().eval()
    if never_eos:
        with torch.no_grad():
            model.generator.bias[EOS] = -1e4
    return model


def assert_same(got, expected) -> None:
    for hyps, ref in zip(got.nbest, expected.nbest, strict=True):
        assert [h.tokens for h in hyps] == [h.tokens for h in ref]
        assert [h.score for h in hyps] == pytest.approx([h.score for h in ref], abs=1e-9)
        for h, r in zip(hyps, ref):
            assert h.token_log_probs == pytest.approx(r.token_log_probs, abs=1e-9)
            torch.testing.assert_close(h.attention, r.attention, atol=1e-9, rtol=0)


SEARCHES = {
    "greedy": lambda model, *src, **kw: greedy_search(model, *src, **kw),
    "beam 4": lambda model, *src, **kw: beam_search(model, *src, beam_size=4, length_penalty=1.0, **kw),
    "constrained": lambda model, *src, **kw: constrained_beam_search(
        model, *src, constraint_batch([[[5, 6]], [], [[7]], [[8], [4]]]), beam_size=3, **kw),
}


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("never_eos", [False, True])
def test_searches_equal_a_decoder_without_cache(search, never_eos):
    """Budgets up to 2 * 9 + 3 = 21 steps (never_eos: all reached) pass the first buffer's
    CACHE_START positions, so the cache grows while rows are reordered and dropped."""
    assert CACHE_START < 21
    model = toy_transformer(0, never_eos=never_eos)
    src = padded_batch([9, 2, 5, 3], extra_pad=1)
    decode = SEARCHES[search]
    budget = dict(max_len_ratio=2.0, max_len_offset=3)
    assert_same(decode(model, *src, **budget), decode(Recomputing(model), *src, **budget))


@pytest.mark.parametrize("search", SEARCHES)
def test_prefixes_through_the_cache_equal_a_decoder_without_cache(search):
    model = toy_transformer(1)
    src = padded_batch([4, 6, 2, 3])
    prefix = torch.tensor([[4, 5, 6], [7, -1, -1], [-1, -1, -1], [8, 9, -1]])  # (batch, prefix_len)
    decode = SEARCHES[search]
    budget = dict(max_len_ratio=1.5, max_len_offset=2, prefix=prefix)
    assert_same(decode(model, *src, **budget), decode(Recomputing(model), *src, **budget))


@torch.inference_mode()
def test_the_cache_is_filled_in_place_and_doubles_when_full():
    model = toy_transformer(2)
    src_ids, src_mask, lengths = padded_batch([3, 5])
    state = model.init_state(model.encode(src_ids, src_mask, lengths))
    storages = []
    for t in range(2 * CACHE_START + 1):
        _, state, _ = model.decode_step(torch.full((2,), BOS), state)
        assert state["self_kv"].shape == (2, 4, 4, t + 1, 4)  # (batch, heads, 2 * layers, t + 1, head_dim)
        storages.append(state["self_kv"].untyped_storage().data_ptr())
    # one buffer for CACHE_START steps, a second for as many more, a third from then on
    assert [len(set(storages[:CACHE_START])), len(set(storages[CACHE_START:2 * CACHE_START]))] == [1, 1]
    assert len(set(storages)) == 3
    index = torch.tensor([1, 1, 0])
    reordered = model.reorder_state(state, index)
    assert torch.equal(reordered["self_kv"], state["self_kv"][index])
    assert reordered["self_kv"].untyped_storage().data_ptr() != storages[-1]  # a copy, not a view


def test_a_saved_checkpoint_loads_unchanged_and_decoding_follows_it(tmp_path):
    """The fused q, k, v projection keeps the three Linear layers' parameters: a weights file
    lists them under their names, loads into a model that already decoded (and built its stacked
    copy), and that model then translates as the one that saved it."""
    saved, other = toy_transformer(3), toy_transformer(4)
    src = padded_batch([5, 2, 4])
    assert greedy_search(saved, *src).tokens != greedy_search(other, *src).tokens  # other's copy built
    save_weights(saved, tmp_path / "weights.safetensors")
    names = set(load_weights_file(tmp_path / "weights.safetensors"))
    assert {f"decoder_layers.1.self_attn.{p}_proj.{t}" for p in ("query", "key", "value")
            for t in ("weight", "bias")} <= names
    assert names == set(other.state_dict())
    load_weights(other, tmp_path / "weights.safetensors")
    assert_same(greedy_search(other, *src), greedy_search(saved, *src))
    assert_same(beam_search(other, *src, beam_size=3), beam_search(Recomputing(saved), *src, beam_size=3))
