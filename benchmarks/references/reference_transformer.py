"""A deliberately plain Transformer translator, the way the PyTorch nn.Transformer tutorial writes it.

The speed *reference* for benchmarks/speed/bench.py with Transformer configs, not part of attnmt. It
follows "Language Translation with nn.Transformer and torchtext" on purpose:

* ``nn.Transformer`` with seq-first tensors ``(src_len, batch, d_model)``;
* masks built per batch (a causal mask and padding masks, bool, True = masked out);
* source / target embeddings and a generator Linear over the full output sequence;
* greedy decoding re-runs the whole decoder over the prefix at every step (no key/value
  cache) until every sentence has emitted eos (the tutorial's ``if next_word == EOS: break``,
  for a batch) or the length budget ends; beam search handles one sentence at a time;
* fp32 only.

Sizes and layout follow the attnmt config, so that both have the same parameters: d_model,
heads, ff_dim, enc_layers, dec_layers, dropout, pre_norm (``norm_first``; with post-norm the
final LayerNorms nn.Transformer adds are dropped, as attnmt has none), share_embeddings (one
source/target embedding) and tie_embeddings (the generator reuses the target embedding);
positions are sinusoidal. `from_attnmt` copies a trained attnmt ``TransformerSeq2Seq`` into it:
same weights, same logits within float tolerance (tests/benchmarks/test_references.py). What differs is the
code: nn.Transformer's layers (fused in_proj, its own fast paths) and the search.

Shapes:
    src_len, tgt_len: positions (padded); batch: sentences; k: live hypotheses;
    d_model: model size; vocab: target vocabulary size.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmarks.references.reference_rnn import length_norm  # the same normalisation for both references

__all__ = ["PositionalEncoding", "ReferenceTransformer", "build_reference", "from_attnmt", "greedy_decode",
           "beam_search_one", "causal_mask"]


class PositionalEncoding(nn.Module):
    """Adds sinusoidal positions (Vaswani et al. 2017, sec. 3.5), then dropout; seq-first."""

    def __init__(self, d_model: int, dropout: float, max_len: int = 5000):
        super().__init__()
        den = torch.exp(-torch.arange(0, d_model, 2) * math.log(10000) / d_model)  # (d_model/2,)
        pos = torch.arange(0, max_len).reshape(max_len, 1)  # (max_len, 1)
        table = torch.zeros((max_len, d_model))
        table[:, 0::2] = torch.sin(pos * den)
        table[:, 1::2] = torch.cos(pos * den)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("table", table.unsqueeze(1))  # (max_len, 1, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """x (len, batch, d_model) -> (len, batch, d_model)."""
        return self.dropout(x + self.table[: x.size(0)])


def causal_mask(size: int, device: torch.device | str) -> Tensor:
    """(size, size) bool, True above the diagonal = may not attend (nn.Transformer's polarity)."""
    return torch.triu(torch.ones(size, size, dtype=torch.bool, device=device), diagonal=1)


class ReferenceTransformer(nn.Module):
    """The tutorial's ``Seq2SeqTransformer``: embeddings * sqrt(d_model) + positions, nn.Transformer,
    generator."""

    def __init__(self, src_vocab: int, tgt_vocab: int, *, d_model: int = 256, heads: int = 8,
                 ff_dim: int = 1024, enc_layers: int = 3, dec_layers: int = 3, dropout: float = 0.1,
                 pre_norm: bool = True, share_embeddings: bool = False, tie_embeddings: bool = False,
                 pad_id: int = 0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first was True"
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(d_model=d_model, nhead=heads, num_encoder_layers=enc_layers,
                                              num_decoder_layers=dec_layers, dim_feedforward=ff_dim,
                                              dropout=dropout, norm_first=pre_norm)
        if not pre_norm:  # post-norm already ends each layer with a LayerNorm; attnmt adds none
            self.transformer.encoder.norm = None
            self.transformer.decoder.norm = None
        if share_embeddings and src_vocab != tgt_vocab:
            raise ValueError(f"share_embeddings needs src_vocab == tgt_vocab; got {src_vocab}, {tgt_vocab}")
        self.src_tok_emb = nn.Embedding(src_vocab, d_model)
        self.tgt_tok_emb = self.src_tok_emb if share_embeddings else nn.Embedding(tgt_vocab, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab)
        if tie_embeddings:
            self.generator.weight = self.tgt_tok_emb.weight

    def forward(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        """Teacher-forced scores of every target position.

        Args:
            src: (src_len, batch) source ids. tgt_in: (tgt_len, batch) ``<bos> y1 .. yn`` (padded).
            teacher_forcing: accepted for the common interface; always 1.

        Returns:
            logits (tgt_len, batch, vocab).
        """
        src_padding_mask = (src == self.pad_id).transpose(0, 1)  # (batch, src_len)
        tgt_padding_mask = (tgt_in == self.pad_id).transpose(0, 1)  # (batch, tgt_len)
        tgt_mask = causal_mask(tgt_in.shape[0], src.device)  # (tgt_len, tgt_len)
        src_emb = self.positional_encoding(self.src_tok_emb(src) * math.sqrt(self.d_model))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(tgt_in) * math.sqrt(self.d_model))
        outs = self.transformer(src_emb, tgt_emb, tgt_mask=tgt_mask, src_key_padding_mask=src_padding_mask,
                                tgt_key_padding_mask=tgt_padding_mask,
                                memory_key_padding_mask=src_padding_mask)  # (tgt_len, batch, d_model)
        return self.generator(outs)  # (tgt_len, batch, vocab)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (src_len, batch) -> memory (src_len, batch, d_model), padding mask (batch, src_len)."""
        src_padding_mask = (src == self.pad_id).transpose(0, 1)  # (batch, src_len)
        src_emb = self.positional_encoding(self.src_tok_emb(src) * math.sqrt(self.d_model))
        return self.transformer.encoder(src_emb, src_key_padding_mask=src_padding_mask), src_padding_mask

    def decode(self, ys: Tensor, memory: Tensor, memory_padding_mask: Tensor) -> Tensor:
        """The whole decoder over a prefix ys (t, batch) -> (t, batch, d_model)."""
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(ys) * math.sqrt(self.d_model))
        return self.transformer.decoder(tgt_emb, memory, tgt_mask=causal_mask(ys.shape[0], ys.device),
                                        memory_key_padding_mask=memory_padding_mask)


def build_reference(model_cfg, src_vocab: int, tgt_vocab: int, pad_id: int = 0) -> ReferenceTransformer:
    """The reference at the sizes of an attnmt `ModelConfig` (arch transformer)."""
    return ReferenceTransformer(src_vocab, tgt_vocab, d_model=model_cfg.d_model, heads=model_cfg.heads,
                                ff_dim=model_cfg.ff_dim, enc_layers=model_cfg.enc_layers,
                                dec_layers=model_cfg.dec_layers, dropout=model_cfg.dropout,
                                pre_norm=model_cfg.pre_norm, share_embeddings=model_cfg.share_embeddings,
                                tie_embeddings=model_cfg.tie_embeddings, pad_id=pad_id)


def _mha(prefix: str, attn) -> dict[str, Tensor]:
    """attnmt's four projections -> nn.MultiheadAttention's in_proj (q; k; v stacked) and out_proj."""
    return {f"{prefix}.in_proj_weight": torch.cat([attn.query_proj.weight, attn.key_proj.weight,
                                                   attn.value_proj.weight]),
            f"{prefix}.in_proj_bias": torch.cat([attn.query_proj.bias, attn.key_proj.bias, attn.value_proj.bias]),
            f"{prefix}.out_proj.weight": attn.out_proj.weight, f"{prefix}.out_proj.bias": attn.out_proj.bias}


def _norm(prefix: str, norm: nn.LayerNorm) -> dict[str, Tensor]:
    return {f"{prefix}.weight": norm.weight, f"{prefix}.bias": norm.bias}


def _ff(prefix: str, ff) -> dict[str, Tensor]:
    return {f"{prefix}.linear1.weight": ff.in_proj.weight, f"{prefix}.linear1.bias": ff.in_proj.bias,
            f"{prefix}.linear2.weight": ff.out_proj.weight, f"{prefix}.linear2.bias": ff.out_proj.bias}


def from_attnmt(model, dropout: float = 0.0) -> ReferenceTransformer:
    """The reference holding the weights of an attnmt ``TransformerSeq2Seq``, mapped layer by layer
    (attnmt's query/key/value projections become nn.MultiheadAttention's stacked in_proj).

    Raises:
        ValueError: learned positions (the reference's are sinusoidal) or projections without bias.
    """
    if model.positions != "sinusoidal":
        raise ValueError(f"the reference has sinusoidal positions; got positions={model.positions!r}")
    enc_layers, dec_layers = model.encoder_layers, model.decoder_layers
    if enc_layers[0].self_attn.query_proj.bias is None:
        raise ValueError("the reference's attention projections have biases; this model's do not")
    ref = ReferenceTransformer(
        model.src_embed.num_embeddings, model.tgt_embed.num_embeddings, d_model=model.d_model, heads=model.heads,
        ff_dim=enc_layers[0].feed_forward.in_proj.out_features, enc_layers=len(enc_layers),
        dec_layers=len(dec_layers), dropout=dropout, pre_norm=model.pre_norm,
        share_embeddings=model.tgt_embed is model.src_embed,
        tie_embeddings=model.generator.weight is model.tgt_embed.weight, pad_id=model.pad_id)
    state = {"src_tok_emb.weight": model.src_embed.weight, "tgt_tok_emb.weight": model.tgt_embed.weight,
             "generator.weight": model.generator.weight, "generator.bias": model.generator.bias,
             "positional_encoding.table": ref.positional_encoding.table}
    for i, layer in enumerate(enc_layers):
        p = f"transformer.encoder.layers.{i}"
        state |= _mha(f"{p}.self_attn", layer.self_attn) | _ff(p, layer.feed_forward)
        state |= _norm(f"{p}.norm1", layer.self_attn_norm) | _norm(f"{p}.norm2", layer.ff_norm)
    for i, layer in enumerate(dec_layers):
        p = f"transformer.decoder.layers.{i}"
        state |= _mha(f"{p}.self_attn", layer.self_attn) | _mha(f"{p}.multihead_attn", layer.cross_attn)
        state |= _ff(p, layer.feed_forward) | _norm(f"{p}.norm1", layer.self_attn_norm)
        state |= _norm(f"{p}.norm2", layer.cross_attn_norm) | _norm(f"{p}.norm3", layer.ff_norm)
    if model.pre_norm:
        state |= _norm("transformer.encoder.norm", model.encoder_norm)
        state |= _norm("transformer.decoder.norm", model.decoder_norm)
    ref.load_state_dict({name: value.detach().clone() for name, value in state.items()}, strict=True)
    return ref.to(model.src_embed.weight.device)


@torch.no_grad()
def greedy_decode(model: ReferenceTransformer, src: Tensor, max_len: int, bos_id: int, eos_id: int | None = None,
                  row_max_lens: Tensor | None = None) -> Tensor:
    """Batched argmax decoding for at most ``max_len`` steps, re-running the decoder on the prefix;
    it stops early once every sentence has emitted ``eos_id`` (never, when eos_id is None) or
    reached its own budget (row_max_lens).

    Args:
        src: (src_len, batch) source ids.
        row_max_lens: (batch,) each sentence's budget (<= max_len); the caller cuts rows to it.

    Returns:
        (steps, batch) predicted ids, steps <= max_len (cut at the first eos by the caller).
    """
    memory, padding_mask = model.encode(src)
    ys = torch.full((1, src.shape[1]), bos_id, dtype=torch.long, device=src.device)  # (1, batch)
    ended = torch.zeros(src.shape[1], dtype=torch.bool, device=src.device)  # (batch,)
    for _ in range(max_len):
        out = model.decode(ys, memory, padding_mask)  # (t, batch, d_model)
        next_word = model.generator(out[-1]).argmax(dim=1)  # (batch,)
        ys = torch.cat([ys, next_word.unsqueeze(0)], dim=0)  # (t + 1, batch)
        if eos_id is not None:
            ended |= next_word == eos_id
            if row_max_lens is not None:
                ended |= row_max_lens <= ys.shape[0] - 1
            if bool(ended.all()):
                break
    return ys[1:]


@torch.no_grad()
def beam_search_one(model: ReferenceTransformer, src: Tensor, *, beam_size: int, max_len: int, bos_id: int,
                    eos_id: int, length_penalty: float | None = None) -> list[int]:
    """Beam search for ONE sentence (src (src_len, 1)); a hypothesis that emits eos leaves the beam.

    Args:
        length_penalty: GNMT alpha: finished hypotheses score log-prob / ((5 + len) / 6)^alpha,
            as attnmt's do; None = log-prob / len, the tutorials' normalisation.

    Returns:
        the best hypothesis by its normalised score, without bos and eos.
    """
    memory, padding_mask = model.encode(src)  # (src_len, 1, d_model), (1, src_len)
    ys = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (t, k)
    scores = torch.zeros(1, device=src.device)  # (k,)
    finished: list[tuple[float, list[int]]] = []
    for t in range(max_len):
        k = ys.shape[1]
        out = model.decode(ys, memory.expand(-1, k, -1), padding_mask.expand(k, -1))  # (t, k, d_model)
        logp = F.log_softmax(model.generator(out[-1]), dim=1)  # (k, vocab)
        candidates = (scores.unsqueeze(1) + logp).view(-1)  # (k * vocab,)
        top_scores, top_index = candidates.topk(min(beam_size - len(finished), candidates.numel()))
        rows, tokens = top_index // logp.shape[1], top_index % logp.shape[1]
        ys = torch.cat([ys[:, rows], tokens.unsqueeze(0)], dim=0)  # (t + 2, k)
        scores = top_scores
        ended = (tokens == eos_id) | (t + 1 == max_len)
        for i in ended.nonzero().flatten().tolist():
            finished.append((float(scores[i]) / length_norm(t + 1, length_penalty), ys[1:, i].tolist()))
        live = (~ended).nonzero().flatten()
        if len(finished) >= beam_size or live.numel() == 0:
            break
        ys, scores = ys[:, live], scores[live]
    best = max(finished, key=lambda f: f[0])[1]
    return [tok for tok in best if tok != eos_id]
