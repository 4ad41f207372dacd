"""A deliberately plain Transformer translator, the way the PyTorch nn.Transformer tutorial writes it.

The speed *reference* for benchmarks/bench.py with Transformer configs, not part of attnmt. It
follows "Language Translation with nn.Transformer and torchtext" on purpose:

* ``nn.Transformer`` with seq-first tensors ``(src_len, batch, d_model)``;
* masks built per batch (a causal mask and padding masks, bool, True = masked out);
* separate source / target embeddings and a generator Linear over the full output sequence;
* greedy decoding re-runs the whole decoder over the prefix at every step (no key/value
  cache), for a fixed number of steps; beam search handles one sentence at a time;
* fp32 only.

Sizes follow the attnmt config: d_model, heads, ff_dim, enc_layers, dec_layers, dropout and
pre_norm (``norm_first``); positions are sinusoidal.

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

__all__ = ["PositionalEncoding", "ReferenceTransformer", "build_reference", "greedy_decode",
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
                 pre_norm: bool = True, pad_id: int = 0):
        super().__init__()
        self.d_model, self.pad_id = d_model, pad_id
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first was True"
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(d_model=d_model, nhead=heads, num_encoder_layers=enc_layers,
                                              num_decoder_layers=dec_layers, dim_feedforward=ff_dim,
                                              dropout=dropout, norm_first=pre_norm)
        self.src_tok_emb = nn.Embedding(src_vocab, d_model)
        self.tgt_tok_emb = nn.Embedding(tgt_vocab, d_model)
        self.positional_encoding = PositionalEncoding(d_model, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab)

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
                                pre_norm=model_cfg.pre_norm, pad_id=pad_id)


@torch.no_grad()
def greedy_decode(model: ReferenceTransformer, src: Tensor, max_len: int, bos_id: int) -> Tensor:
    """Batched argmax decoding for exactly ``max_len`` steps, re-running the decoder on the prefix.

    Args:
        src: (src_len, batch) source ids.

    Returns:
        (max_len, batch) predicted ids (cut at the first eos by the caller).
    """
    memory, padding_mask = model.encode(src)
    ys = torch.full((1, src.shape[1]), bos_id, dtype=torch.long, device=src.device)  # (1, batch)
    for _ in range(max_len):
        out = model.decode(ys, memory, padding_mask)  # (t, batch, d_model)
        next_word = model.generator(out[-1]).argmax(dim=1)  # (batch,)
        ys = torch.cat([ys, next_word.unsqueeze(0)], dim=0)  # (t + 1, batch)
    return ys[1:]


@torch.no_grad()
def beam_search_one(model: ReferenceTransformer, src: Tensor, *, beam_size: int, max_len: int, bos_id: int,
                    eos_id: int) -> list[int]:
    """Beam search for ONE sentence (src (src_len, 1)); a hypothesis that emits eos leaves the beam.

    Returns:
        the best hypothesis by log-probability / length, without bos and eos.
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
            finished.append((float(scores[i]) / (t + 1), ys[1:, i].tolist()))
        live = (~ended).nonzero().flatten()
        if len(finished) >= beam_size or live.numel() == 0:
            break
        ys, scores = ys[:, live], scores[live]
    best = max(finished, key=lambda f: f[0])[1]
    return [tok for tok in best if tok != eos_id]
