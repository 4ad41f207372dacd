"""A deliberately plain Bahdanau RNN translator, the way the classic PyTorch tutorials write it.

This is the speed *reference* for benchmarks/speed/bench.py, not part of attnmt: it follows the
seq2seq tutorials (e.g. pytorch-seq2seq notebooks 3 "Neural Machine Translation by Jointly Learning
to Align and Translate" and 4 "Packed Padded Sequences, Masking, ...") on purpose, with everything
attnmt does differently left out:

* seq-first tensors ``(src_len, batch)``; packed padded sequences in the encoder and masked
  attention, as in notebook 4 (lengths and mask computed from ``src != pad_id``, the lengths
  moved to the host for packing), so padding changes no output, as in attnmt;
* the attention concatenates the decoder state, repeated over the source, with the encoder
  states and runs one Linear over the concatenation at EVERY step (no key projection cached);
* the output Linear runs inside the time loop, once per step; outputs go into a preallocated
  ``torch.zeros`` tensor; teacher forcing draws ``random.random()`` per step on the host;
* greedy decoding runs batches in input order until every sentence has emitted eos (the
  tutorial's ``if next_word == EOS: break``, for a batch) or the length budget ends; beam search
  handles one sentence at a time (its live hypotheses are batched together), as the tutorials
  do, and stops once it holds beam_size finished hypotheses;
* fp32 only.

`from_attnmt` builds the reference with the weights of a trained attnmt ``RNNSeq2Seq``
(Bahdanau attention, one encoder layer, untied output), so that both decode the same model:
the parameter count is the same, and on a padded batch the logits agree within float
tolerance (tests/benchmarks/test_references.py).

Sizes follow the attnmt config: emb_dim, enc_hidden (per direction), dec_hidden and attn_dim
(the tutorial's energy size is dec_hidden; attnmt's configs set attn_dim, equal to dec_hidden in
configs/multi30k_rnn.yaml).

Shapes:
    src_len, tgt_len: source / target positions (padded); batch: sentences; k: live hypotheses
    emb_dim, enc_hidden, dec_hidden, attn_dim: layer sizes; vocab: target vocabulary size.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = ["Encoder", "Attention", "Decoder", "ReferenceRNN", "build_reference", "from_attnmt", "greedy_decode",
           "beam_search_one"]


class Encoder(nn.Module):
    """Embedding + bidirectional GRU over packed padded sequences; fc to the decoder state."""

    def __init__(self, vocab_size: int, emb_dim: int, enc_hidden: int, dec_hidden: int, dropout: float):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.rnn = nn.GRU(emb_dim, enc_hidden, bidirectional=True)
        self.fc = nn.Linear(enc_hidden * 2, dec_hidden)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, Tensor]:
        """src (src_len, batch), src_len (batch,) -> outputs (src_len, batch, 2*enc_hidden) (zero on
        padding), hidden (batch, dec_hidden)."""
        embedded = self.dropout(self.embedding(src))  # (src_len, batch, emb_dim)
        packed = pack_padded_sequence(embedded, src_len.cpu(), enforce_sorted=False)
        packed_outputs, hidden = self.rnn(packed)  # hidden: (2, batch, enc_hidden)
        outputs, _ = pad_packed_sequence(packed_outputs, total_length=src.shape[0])  # (src_len, batch, 2*enc_hidden)
        hidden = torch.tanh(self.fc(torch.cat((hidden[-2], hidden[-1]), dim=1)))  # (batch, dec_hidden)
        return outputs, hidden


class Attention(nn.Module):
    """Additive attention as one Linear over [s; h_j] (Bahdanau et al. 2015, eq. 6), padding masked."""

    def __init__(self, enc_hidden: int, dec_hidden: int, attn_dim: int):
        super().__init__()
        self.attn = nn.Linear(enc_hidden * 2 + dec_hidden, attn_dim)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, hidden: Tensor, encoder_outputs: Tensor, mask: Tensor) -> Tensor:
        """hidden (batch, dec_hidden), encoder_outputs (src_len, batch, 2*enc_hidden), mask (batch, src_len)
        True = real token -> (batch, src_len)."""
        src_len = encoder_outputs.shape[0]
        hidden = hidden.unsqueeze(1).repeat(1, src_len, 1)  # (batch, src_len, dec_hidden)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)  # (batch, src_len, 2*enc_hidden)
        energy = torch.tanh(self.attn(torch.cat((hidden, encoder_outputs), dim=2)))  # (batch, src_len, attn_dim)
        attention = self.v(energy).squeeze(2)  # (batch, src_len)
        attention = attention.masked_fill(mask == 0, -1e10)
        return F.softmax(attention, dim=1)


class Decoder(nn.Module):
    """One step: attend with s_{i-1}, GRU over [E y; c], predict from [s_i; c; E y]."""

    def __init__(self, vocab_size: int, emb_dim: int, enc_hidden: int, dec_hidden: int, attn_dim: int,
                 dropout: float):
        super().__init__()
        self.output_dim = vocab_size
        self.attention = Attention(enc_hidden, dec_hidden, attn_dim)
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.rnn = nn.GRU(enc_hidden * 2 + emb_dim, dec_hidden)
        self.fc_out = nn.Linear(enc_hidden * 2 + dec_hidden + emb_dim, vocab_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input: Tensor, hidden: Tensor, encoder_outputs: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """input (batch,), hidden (batch, dec_hidden), encoder_outputs (src_len, batch, 2*enc_hidden),
        mask (batch, src_len) -> prediction (batch, vocab), hidden (batch, dec_hidden)."""
        input = input.unsqueeze(0)  # (1, batch)
        embedded = self.dropout(self.embedding(input))  # (1, batch, emb_dim)
        a = self.attention(hidden, encoder_outputs, mask).unsqueeze(1)  # (batch, 1, src_len)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)  # (batch, src_len, 2*enc_hidden)
        weighted = torch.bmm(a, encoder_outputs).permute(1, 0, 2)  # (1, batch, 2*enc_hidden)
        rnn_input = torch.cat((embedded, weighted), dim=2)  # (1, batch, 2*enc_hidden + emb_dim)
        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))  # (1, batch, dec_hidden) each
        prediction = self.fc_out(torch.cat((output.squeeze(0), weighted.squeeze(0), embedded.squeeze(0)),
                                           dim=1))  # (batch, vocab)
        return prediction, hidden.squeeze(0)


class ReferenceRNN(nn.Module):
    """Encoder + attentive decoder, the tutorial's ``Seq2Seq``."""

    def __init__(self, src_vocab: int, tgt_vocab: int, *, emb_dim: int = 256, enc_hidden: int = 512,
                 dec_hidden: int = 512, attn_dim: int = 512, dropout: float = 0.5, pad_id: int = 0):
        super().__init__()
        self.pad_id = pad_id
        self.encoder = Encoder(src_vocab, emb_dim, enc_hidden, dec_hidden, dropout)
        self.decoder = Decoder(tgt_vocab, emb_dim, enc_hidden, dec_hidden, attn_dim, dropout)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """src (src_len, batch) -> encoder outputs (src_len, batch, 2*enc_hidden), hidden (batch, dec_hidden),
        mask (batch, src_len) True = real token."""
        mask = (src != self.pad_id).t()  # (batch, src_len)
        encoder_outputs, hidden = self.encoder(src, mask.sum(1))
        return encoder_outputs, hidden, mask

    def forward(self, src: Tensor, tgt_in: Tensor, teacher_forcing: float = 1.0) -> Tensor:
        """Teacher-forced scores of every target position.

        Args:
            src: (src_len, batch) source ids.
            tgt_in: (tgt_len, batch) ``<bos> y1 .. yn`` (padded).
            teacher_forcing: probability, drawn per step on the host, of feeding the gold token.

        Returns:
            logits (tgt_len, batch, vocab); row t predicts the token after tgt_in[t].
        """
        tgt_len, batch = tgt_in.shape
        outputs = torch.zeros(tgt_len, batch, self.decoder.output_dim, device=src.device,
                              dtype=self.decoder.fc_out.weight.dtype)
        encoder_outputs, hidden, mask = self.encode(src)
        input = tgt_in[0]  # (batch,) <bos>
        for t in range(tgt_len):
            output, hidden = self.decoder(input, hidden, encoder_outputs, mask)
            outputs[t] = output
            if t + 1 < tgt_len:
                teacher_force = random.random() < teacher_forcing
                top1 = output.argmax(1)  # (batch,)
                input = tgt_in[t + 1] if teacher_force else top1
        return outputs


def build_reference(model_cfg, src_vocab: int, tgt_vocab: int, pad_id: int = 0) -> ReferenceRNN:
    """The reference at the sizes of an attnmt `ModelConfig` (arch rnn)."""
    return ReferenceRNN(src_vocab, tgt_vocab, emb_dim=model_cfg.emb_dim, enc_hidden=model_cfg.enc_hidden,
                        dec_hidden=model_cfg.dec_hidden, attn_dim=model_cfg.attn_dim, dropout=model_cfg.dropout,
                        pad_id=pad_id)


def from_attnmt(model, dropout: float = 0.0) -> ReferenceRNN:
    """The reference holding the weights of an attnmt ``RNNSeq2Seq``, mapped layer by layer.

    attnmt's additive attention ``v^T tanh(W_q s + W_k h + b)`` is the tutorial's one Linear
    over ``[s; h]`` with weight ``[W_q, W_k]`` and bias ``b``; its GRUCell is a one-step GRU.

    Raises:
        ValueError: an attnmt model the reference cannot express (Luong attention, stacked
            encoder layers, tied output embedding).
    """
    enc, dec = model.encoder, model.decoder
    if dec.kind != "bahdanau" or enc.layers != 1 or dec.pre_output is not None:
        raise ValueError(f"the reference has Bahdanau attention, 1 encoder layer and an untied output; got "
                         f"attention={dec.kind!r}, layers={enc.layers}, tied={dec.pre_output is not None}")
    attn = dec.attention
    ref = ReferenceRNN(enc.src_embed.num_embeddings, dec.tgt_embed.num_embeddings,
                       emb_dim=enc.src_embed.embedding_dim, enc_hidden=enc.hidden, dec_hidden=dec.hidden,
                       attn_dim=attn.energy.in_features, dropout=dropout, pad_id=model.pad_id)
    state = {
        "encoder.embedding.weight": enc.src_embed.weight,
        **{f"encoder.rnn.{name}": value for name, value in enc.rnn.state_dict().items()},
        "encoder.fc.weight": enc.bridge.weight, "encoder.fc.bias": enc.bridge.bias,
        "decoder.embedding.weight": dec.tgt_embed.weight,
        "decoder.attention.attn.weight": torch.cat([attn.query_proj.weight, attn.key_proj.weight], dim=1),
        "decoder.attention.attn.bias": attn.key_proj.bias,
        "decoder.attention.v.weight": attn.energy.weight,
        **{f"decoder.rnn.{name}_l0": value for name, value in dec.cell.state_dict().items()},
        "decoder.fc_out.weight": dec.generator.weight, "decoder.fc_out.bias": dec.generator.bias,
    }
    ref.load_state_dict({name: value.detach().clone() for name, value in state.items()}, strict=True)
    return ref.to(enc.src_embed.weight.device)


@torch.no_grad()
def greedy_decode(model: ReferenceRNN, src: Tensor, max_len: int, bos_id: int, eos_id: int | None = None,
                  row_max_lens: Tensor | None = None) -> Tensor:
    """Batched argmax decoding for at most ``max_len`` steps; it stops early once every sentence
    has emitted ``eos_id`` (never, when eos_id is None) or reached its own budget (row_max_lens).

    Args:
        src: (src_len, batch) source ids.
        row_max_lens: (batch,) each sentence's budget (<= max_len); the caller cuts rows to it.

    Returns:
        (steps, batch) predicted ids, steps <= max_len (cut at the first eos by the caller).
    """
    encoder_outputs, hidden, mask = model.encode(src)
    input = torch.full((src.shape[1],), bos_id, dtype=torch.long, device=src.device)  # (batch,)
    ended = torch.zeros(src.shape[1], dtype=torch.bool, device=src.device)  # (batch,)
    tokens = []
    for _ in range(max_len):
        output, hidden = model.decoder(input, hidden, encoder_outputs, mask)
        input = output.argmax(1)
        tokens.append(input)
        if eos_id is not None:
            ended |= input == eos_id
            if row_max_lens is not None:
                ended |= row_max_lens <= len(tokens)
            if bool(ended.all()):
                break
    return torch.stack(tokens)  # (steps, batch)


def length_norm(length: int, length_penalty: float | None) -> float:
    """The divisor of a finished hypothesis' log-prob: its length, or the GNMT penalty
    ((5 + length) / 6)^alpha (Wu et al. 2016, eq. 14) when alpha = length_penalty is given."""
    return float(length) if length_penalty is None else ((5.0 + length) / 6.0) ** length_penalty


@torch.no_grad()
def beam_search_one(model: ReferenceRNN, src: Tensor, *, beam_size: int, max_len: int, bos_id: int,
                    eos_id: int, length_penalty: float | None = None) -> list[int]:
    """Beam search for ONE sentence; a hypothesis that emits eos leaves the beam, which shrinks.

    Args:
        src: (src_len, 1) source ids of one sentence.
        length_penalty: GNMT alpha: finished hypotheses score log-prob / ((5 + len) / 6)^alpha,
            as attnmt's do; None = log-prob / len, the tutorials' normalisation.

    Returns:
        the best hypothesis by its normalised score, without bos and eos.
    """
    encoder_outputs, hidden, mask = model.encode(src)  # (src_len, 1, 2*enc_hidden), (1, dec_hidden), (1, src_len)
    hyps = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (k, t)
    scores = torch.zeros(1, device=src.device)  # (k,)
    finished: list[tuple[float, list[int]]] = []
    for t in range(max_len):
        k = hyps.shape[0]
        output, hidden = model.decoder(hyps[:, -1], hidden, encoder_outputs.expand(-1, k, -1), mask.expand(k, -1))
        candidates = (scores.unsqueeze(1) + F.log_softmax(output, dim=1)).view(-1)  # (k * vocab,)
        top_scores, top_index = candidates.topk(min(beam_size - len(finished), candidates.numel()))
        rows, tokens = top_index // output.shape[1], top_index % output.shape[1]
        hyps = torch.cat([hyps[rows], tokens.unsqueeze(1)], dim=1)  # (k, t + 2)
        hidden, scores = hidden[rows], top_scores
        ended = (tokens == eos_id) | (t + 1 == max_len)
        for i in ended.nonzero().flatten().tolist():
            finished.append((float(scores[i]) / length_norm(t + 1, length_penalty), hyps[i, 1:].tolist()))
        live = (~ended).nonzero().flatten()
        if len(finished) >= beam_size or live.numel() == 0:
            break
        hyps, hidden, scores = hyps[live], hidden[live], scores[live]
    best = max(finished, key=lambda f: f[0])[1]
    return [tok for tok in best if tok != eos_id]
