"""The RNN translator: bi-GRU encoder and attentive GRU decoder (Bahdanau 2015; Luong 2015).

Shapes:
    batch: sentences in the batch.
    src_len, tgt_len: source / target positions (padded).
    hidden: decoder state size; enc_dim = 2 * encoder hidden (both directions).
    emb_dim, attn_dim: embedding and attention sizes.
    readout_dim: input size of the output layer (``AttentiveGRUDecoder.readout_dim``).
    vocab: target vocabulary size.

The decoder runs one step at a time (``decode_step``, used by decoding/search.py) or over a whole
teacher-forced target (``forward``), which applies the output layer once after the time loop.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.attention import AdditiveAttention, DotAttention, GeneralAttention
from attnmt.models.dropout import Dropout
from attnmt.models.outputs import EncoderOutput, ModelOutput, check_source

__all__ = ["EncoderOutput", "ModelOutput", "DecoderStep", "GRUEncoder", "AttentiveGRUDecoder",
           "RNNSeq2Seq", "ATTENTION_TYPES"]

ATTENTION_TYPES = ("bahdanau", "luong-dot", "luong-general")

State = dict[str, Tensor]
SOURCE_ENTRIES = ("enc_states", "src_mask", "proj_keys")  # state that depends only on the source


class DecoderStep(NamedTuple):
    """One decoder step: features for the output layer, attention weights, the next state."""

    features: Tensor  # (batch, readout_dim)
    weights: Tensor  # (batch, src_len)
    state: State


class GRUEncoder(nn.Module):
    """Bidirectional GRU over packed sequences, Bahdanau et al. 2015 sec. 3.2 and eq. A.2.1.

    Padding never enters the recurrence (pack_padded_sequence), so a sentence's states do not
    depend on the batch it is in. The initial decoder state is s_0 = tanh(W_s [h_fwd_last;
    h_bwd_first]), both taken from the top layer (the paper uses h_bwd_first alone).
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, *, dec_hidden: int | None = None,
                 layers: int = 1, dropout: float = 0.0, pad_id: int = 0):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        self.dec_hidden = hidden if dec_hidden is None else dec_hidden
        self.src_embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.dropout = Dropout(dropout)
        self.rnn = nn.GRU(emb_dim, hidden, num_layers=layers, batch_first=True, bidirectional=True,
                          dropout=dropout if layers > 1 else 0.0)
        self.bridge = nn.Linear(2 * hidden, self.dec_hidden)

    @property
    def output_dim(self) -> int:
        return 2 * self.hidden

    def forward(self, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor) -> EncoderOutput:
        """Encode a padded batch.

        Args:
            src_ids: (batch, src_len) long, padded with pad_id.
            src_mask: (batch, src_len) bool, True = real token.
            src_lengths: (batch,) long, each in [1, src_len].

        Returns:
            EncoderOutput(states (batch, src_len, 2*hidden), mask, final (batch, dec_hidden)).

        Raises:
            ValueError: shapes disagree or a length is outside [1, src_len].
        """
        check_source(src_ids, src_mask, src_lengths)
        batch, src_len = src_ids.shape
        lengths = src_lengths.detach().to("cpu", torch.int64)  # packing needs lengths on the CPU
        if batch and (int(lengths.min()) < 1 or int(lengths.max()) > src_len):
            raise ValueError(
                f"src_lengths must lie in [1, src_len={src_len}]; got {lengths.tolist()}")
        embedded = self.dropout(self.src_embed(src_ids))  # (batch, src_len, emb_dim)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        device_type = src_ids.device.type
        # The GRU runs in float32 even under autocast: CUDA's autocast runs cuDNN's GRU in float16
        # whatever dtype was asked for (bf16 included, with no loss scaling), the CPU's leaves it in
        # float32. Under autocast its states then take the autocast dtype, as the linear layers'
        # outputs do, so that attention sees one dtype.
        with torch.autocast(device_type, enabled=False):
            packed_states, final = self.rnn(packed)
        states, _ = pad_packed_sequence(packed_states, batch_first=True, total_length=src_len)
        if torch.is_autocast_enabled(device_type):
            states = states.to(torch.get_autocast_dtype(device_type))
        # states: (batch, src_len, 2*hidden), zero on padding
        # cuDNN's (layers*2, batch, hidden) -> top layer [h_fwd_last; h_bwd_first] (batch, 2*hidden)
        last = final.view(self.layers, 2, batch, self.hidden)[-1].transpose(0, 1).reshape(batch, -1)
        return EncoderOutput(states, src_mask, torch.tanh(self.bridge(last)))


class AttentiveGRUDecoder(nn.Module):
    """GRU decoder with attention over the encoder states.

    ``attention="bahdanau"`` (Bahdanau et al. 2015, eqs. A.2.2): attend with the previous state
    s_{i-1} as query (additive, keys projected once per batch), update s_i = GRU(s_{i-1},
    [E y_{i-1}; c_i]), predict from [s_i; c_i; E y_{i-1}] (like the paper's t~_i, with s_i
    in place of s_{i-1} and no maxout).

    ``attention="luong-dot" | "luong-general"`` (Luong et al. 2015): h_t = GRU(h_{t-1},
    [E y_{t-1}; h~_{t-1}]) with input feeding (sec. 3.3), attend with h_t (eq. 8), attentional
    hidden h~_t = tanh(W_c [c_t; h_t]) (eq. 5), predict from h~_t (eq. 6). Dot needs
    hidden == enc_dim.

    With ``tie_embeddings`` the output layer shares the target embedding (Press & Wolf 2017):
    Bahdanau's readout goes through tanh(Linear(., emb_dim)) first; Luong's h~ has size emb_dim.
    """

    def __init__(self, vocab_size: int, emb_dim: int, enc_dim: int, hidden: int, *, attn_dim: int,
                 dropout: float = 0.0, attention: str = "bahdanau", tie_embeddings: bool = False,
                 pad_id: int = 0):
        super().__init__()
        if attention not in ATTENTION_TYPES:
            raise ValueError(f"attention must be one of {ATTENTION_TYPES}; got {attention!r}")
        if attention == "luong-dot" and hidden != enc_dim:
            raise ValueError(f"attention='luong-dot' needs decoder hidden == encoder output size; "
                             f"got hidden={hidden}, enc_dim={enc_dim} (use 'luong-general')")
        self.kind, self.hidden = attention, hidden
        self.tgt_embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.dropout = Dropout(dropout)
        self.pre_output: nn.Linear | None = None
        if attention == "bahdanau":
            self.attention = AdditiveAttention(hidden, enc_dim, attn_dim)
            self.cell = nn.GRUCell(emb_dim + enc_dim, hidden)
            readout_dim = hidden + enc_dim + emb_dim
            if tie_embeddings:
                self.pre_output = nn.Linear(readout_dim, emb_dim)
                readout_dim = emb_dim
        else:
            attn_cls = DotAttention if attention == "luong-dot" else GeneralAttention
            self.attention = attn_cls(hidden, enc_dim)
            readout_dim = emb_dim if tie_embeddings else hidden
            self.cell = nn.GRUCell(emb_dim + readout_dim, hidden)
            self.attn_combine = nn.Linear(enc_dim + hidden, readout_dim, bias=False)  # W_c
        self.readout_dim = readout_dim
        self.generator = nn.Linear(readout_dim, vocab_size)
        if tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    @property
    def luong(self) -> bool:
        return self.kind != "bahdanau"

    def init_state(self, enc: EncoderOutput) -> State:
        """State before the first step; the key projection is computed here, once per batch."""
        state = {"hidden": enc.final, "enc_states": enc.states, "src_mask": enc.mask}
        if self.luong:
            state["feed"] = enc.final.new_zeros(enc.final.shape[0], self.readout_dim)
        if self.kind != "luong-dot":  # W_k h_j (additive) or W_a h_s (general), reused each step
            # (batch, src_len, attn_dim); hidden for general attention
            state["proj_keys"] = self.attention.project_keys(enc.states)
        return state

    def embed(self, ids: Tensor) -> Tensor:
        """Embed target ids: (batch[, tgt_len]) -> (batch[, tgt_len], emb_dim)."""
        return self.dropout(self.tgt_embed(ids))

    def step(self, embedded: Tensor, state: State) -> DecoderStep:
        """Advance one target position.

        Args:
            embedded: (batch, emb_dim) embedding of the previous target token.
            state: from ``init_state`` or the previous step.

        Returns:
            DecoderStep(features (batch, readout_dim), weights (batch, src_len), state).
        """
        if self.luong:
            hidden = self.cell(torch.cat([embedded, state["feed"]], dim=-1), state["hidden"])
            context, weights = self._attend(hidden, state)
            features = torch.tanh(self.attn_combine(torch.cat([context, hidden], dim=-1)))
            return DecoderStep(features, weights, {**state, "hidden": hidden, "feed": features})
        context, weights = self._attend(state["hidden"], state)
        hidden = self.cell(torch.cat([embedded, context], dim=-1), state["hidden"])
        features = torch.cat([hidden, context, embedded], dim=-1)  # (batch, readout_dim)
        return DecoderStep(features, weights, {**state, "hidden": hidden})

    def _attend(self, query: Tensor, state: State) -> tuple[Tensor, Tensor]:
        """Context (batch, enc_dim) and weights (batch, src_len) for a (batch, hidden) query."""
        keys, mask = state["enc_states"], state["src_mask"]
        query = query.to(keys.dtype)  # under autocast the keys are in its dtype, a CPU GRUCell's state in float32
        if "proj_keys" in state:
            return self.attention(query, keys, keys, mask, projected_keys=state["proj_keys"])
        return self.attention(query, keys, keys, mask)

    def generate(self, features: Tensor) -> Tensor:
        """Output layer: (batch[, tgt_len], readout_dim) -> logits (batch[, tgt_len], vocab)."""
        features = self.dropout(features)
        if self.pre_output is not None:
            features = torch.tanh(self.pre_output(features))  # (batch[, tgt_len], emb_dim)
        return self.generator(features)


class RNNSeq2Seq(nn.Module):
    """Encoder-decoder RNN translator with attention (Bahdanau et al. 2015; Luong et al. 2015).

    ``layers`` stacks encoder layers; the decoder is a single GRU cell.
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, *, emb_dim: int = 256, enc_hidden: int = 512,
                 dec_hidden: int = 512, attn_dim: int = 512, layers: int = 1, dropout: float = 0.5,
                 attention: str = "bahdanau", tie_embeddings: bool = False, pad_id: int = 0,
                 bos_id: int = 2, eos_id: int = 3):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout}")
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.encoder = GRUEncoder(src_vocab, emb_dim, enc_hidden, dec_hidden=dec_hidden,
                                  layers=layers, dropout=dropout, pad_id=pad_id)
        self.decoder = AttentiveGRUDecoder(
            tgt_vocab, emb_dim, self.encoder.output_dim, dec_hidden, attn_dim=attn_dim,
            dropout=dropout, attention=attention, tie_embeddings=tie_embeddings, pad_id=pad_id)

    def encode(self, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor) -> EncoderOutput:
        """Run the encoder; see ``GRUEncoder.forward``."""
        return self.encoder(src_ids, src_mask, src_lengths)

    def init_state(self, enc: EncoderOutput) -> State:
        """Decoder state, batch on dim 0: hidden, enc_states, src_mask; proj_keys (additive and
        general attention); feed (Luong's input feeding, h~_{t-1})."""
        return self.decoder.init_state(enc)

    def decode_step(self, prev_ids: Tensor, state: State) -> tuple[Tensor, State, Tensor]:
        """One decoder step.

        Args:
            prev_ids: (batch,) previous target tokens (bos at the first step).
            state: from ``init_state`` or the previous step.

        Returns:
            logits (batch, vocab), the new state, attention weights (batch, src_len).
        """
        if prev_ids.dim() != 1 or prev_ids.shape[0] != state["hidden"].shape[0]:
            raise ValueError(f"prev_ids must be (batch,) with batch={state['hidden'].shape[0]}; "
                             f"got {tuple(prev_ids.shape)}")
        step = self.decoder.step(self.decoder.embed(prev_ids), state)
        return self.decoder.generate(step.features), step.state, step.weights

    @staticmethod
    def reorder_state(state: State, index: Tensor, *, within_sentences: bool = False) -> State:
        """Select rows (beams) of every state tensor: index (n,) -> each tensor (n, ...).

        ``within_sentences=True`` promises that every row is taken from a row of its own
        sentence, and that all rows of a sentence hold the same source (beam search reordering
        the hypotheses of an unchanged set of sentences): the source side (``enc_states``,
        ``src_mask``, ``proj_keys``) is then kept as it is instead of copied.
        """
        return {name: value if within_sentences and name in SOURCE_ENTRIES
                else value.index_select(0, index) for name, value in state.items()}

    def forward(self, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, tgt_in: Tensor, *,
                teacher_forcing: float = 1.0) -> ModelOutput:
        """Score a target given the source.

        With ``teacher_forcing=1`` the gold token feeds every step and the output layer runs once
        on all steps after the loop. Below 1, at each step one coin (for the whole batch, drawn
        on the device: no host sync) picks the gold token with that probability, else the
        model's own argmax prediction, as in the PyTorch seq2seq tutorial.

        Args:
            src_ids, src_mask, src_lengths: (batch, src_len), (batch, src_len), (batch,).
            tgt_in: (batch, tgt_len) long, <bos> y1 .. yn (padded).
            teacher_forcing: probability of feeding the gold token, in [0, 1].

        Returns:
            ModelOutput(logits (batch, tgt_len, vocab), attention (batch, tgt_len, src_len)).

        Raises:
            ValueError: bad shapes or teacher_forcing outside [0, 1].
        """
        if tgt_in.dim() != 2 or tgt_in.shape[0] != src_ids.shape[0]:
            raise ValueError(f"tgt_in must be (batch, tgt_len) with batch={src_ids.shape[0]}; "
                             f"got {tuple(tgt_in.shape)}")
        if not 0.0 <= teacher_forcing <= 1.0:
            raise ValueError(f"teacher_forcing must be in [0, 1]; got {teacher_forcing}")
        state = self.init_state(self.encode(src_ids, src_mask, src_lengths))
        weights = []
        if teacher_forcing == 1.0:
            embedded = self.decoder.embed(tgt_in)  # (batch, tgt_len, emb_dim)
            features = []
            for t in range(tgt_in.shape[1]):
                step = self.decoder.step(embedded[:, t], state)
                state = step.state
                features.append(step.features)
                weights.append(step.weights)
            logits = self.decoder.generate(torch.stack(features, dim=1))  # (batch, tgt_len, vocab)
            return ModelOutput(logits, torch.stack(weights, dim=1))  # (batch, tgt_len, src_len)
        all_logits, prev_ids = [], tgt_in[:, 0]
        for t in range(tgt_in.shape[1]):
            if t > 0:
                use_gold = torch.rand((), device=tgt_in.device) < teacher_forcing
                prev_ids = torch.where(use_gold, tgt_in[:, t], all_logits[-1].argmax(dim=-1))
            step = self.decoder.step(self.decoder.embed(prev_ids), state)
            state = step.state
            all_logits.append(self.decoder.generate(step.features))  # (batch, vocab)
            weights.append(step.weights)
        return ModelOutput(torch.stack(all_logits, dim=1), torch.stack(weights, dim=1))
