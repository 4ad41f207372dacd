"""The Transformer translator: encoder-decoder multi-head attention (Vaswani et al. 2017).

Shapes:
    batch: sentences in the batch (rows: sentences x beam in beam search).
    src_len, tgt_len: source / target positions (padded); t: target steps decoded so far.
    len: src_len or tgt_len, where a function serves both.
    hidden: d_model, the residual stream size; ff_dim: the feed-forward inner size.
    heads: attention heads; head_dim = d_model // heads.
    layers: decoder layers whose cross-attention is reported.
    vocab: target vocabulary size.

Training runs the whole target at once through SDPA (``need_weights=False``); the math path
is used only where cross-attention weights are reported (``decode_step``, or
``forward(..., need_attention=True)``), and then only in the layers the view asks for.
Incremental decoding keeps, per decoder layer, the cross-attention keys/values projected once
(``init_state``), and one self-attention key/value cache for all layers, ``self_kv``: the first
t positions of a preallocated buffer, which ``decode_step`` fills in place one position at a
time (the buffer doubles when full; no per-step ``cat``). Every state tensor has batch on dim 0,
so ``reorder_state`` is one ``index_select`` per tensor, and one for all layers' caches. The step
number is the cache length, so it needs no tensor of its own.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnmt.attention import MultiHeadAttention
from attnmt.masks import causal_mask
from attnmt.models.dropout import Dropout
from attnmt.models.outputs import EncoderOutput, ModelOutput, check_source

__all__ = ["TransformerSeq2Seq", "EncoderLayer", "DecoderLayer", "sinusoidal_positions",
           "POSITION_TYPES", "ACTIVATIONS"]

# "sinusoidal": sin / cos interleaved (even / odd dimensions, Vaswani et al. 2017 sec. 3.5);
# "sinusoidal_halves": the same frequencies, sin in the first half, cos in the second (Marian,
# tensor2tensor, fairseq); "learned": a trained table (Gehring et al. 2017).
POSITION_TYPES = ("sinusoidal", "sinusoidal_halves", "learned")
# the feed-forward's nonlinearity: ReLU (Vaswani et al. 2017 eq. 2), GELU (Hendrycks & Gimpel
# 2016, exact erf form), swish = SiLU, x * sigmoid(x) (Ramachandran et al. 2017; Marian's OPUS-MT)
ACTIVATIONS = {"relu": torch.relu, "gelu": nn.functional.gelu, "swish": nn.functional.silu}

State = dict[str, Tensor]
KV = tuple[Tensor, Tensor]  # k, v: each (batch, heads, len, head_dim)
CACHE_START = 16  # positions the self-attention cache buffer starts with; it doubles when full


def sinusoidal_positions(max_len: int, d_model: int, *, halves: bool = False) -> Tensor:
    """Position encodings, Vaswani et al. 2017 sec. 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)),
    PE(pos, 2i+1) = cos(same); returns (max_len, d_model). With `halves` (Marian's layout), the
    ceil(d/2) sines come first and the floor(d/2) cosines after them: PE(pos, i) = sin(...i...),
    PE(pos, ceil(d/2) + i) = cos(...i...)."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64)
                         * (-math.log(10000.0) / d_model))  # (ceil(d_model / 2),)
    sines = torch.sin(position * inv_freq)  # (max_len, ceil(d_model / 2))
    cosines = torch.cos(position * inv_freq[: d_model // 2])  # (max_len, d_model // 2)
    if halves:
        return torch.cat([sines, cosines], dim=1).float()  # (max_len, d_model)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = sines
    table[:, 1::2] = cosines
    return table.float()


class FeedForward(nn.Module):
    """Position-wise feed-forward, Vaswani et al. 2017 eq. 2: FFN(x) = act(x W_1 + b_1) W_2 + b_2,
    act = ReLU there (`ACTIVATIONS` for the others); dropout on act's output."""

    def __init__(self, d_model: int, ff_dim: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}; got {activation!r}")
        self.in_proj = nn.Linear(d_model, ff_dim)
        self.out_proj = nn.Linear(ff_dim, d_model)
        self.dropout = Dropout(dropout)
        self.activation = activation
        self._act = ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        """(batch, len, hidden) -> (batch, len, hidden)."""
        return self.out_proj(self.dropout(self._act(self.in_proj(x))))  # via (batch, len, ff_dim)


class _Sublayers(nn.Module):
    """Residual wiring shared by both layer types (Vaswani et al. 2017 sec. 5.4).

    Post-norm (the paper): x = LayerNorm(x + Dropout(sublayer(x))). Pre-norm (Wang et al. 2019,
    the default): x = x + Dropout(sublayer(LayerNorm(x))).
    """

    def __init__(self, dropout: float, pre_norm: bool):
        super().__init__()
        self.pre_norm = pre_norm
        self.dropout = Dropout(dropout)

    def sublayer_input(self, x: Tensor, norm: nn.LayerNorm) -> Tensor:
        return norm(x) if self.pre_norm else x

    def residual(self, x: Tensor, out: Tensor, norm: nn.LayerNorm) -> Tensor:
        x = x + self.dropout(out)
        return x if self.pre_norm else norm(x)


class EncoderLayer(_Sublayers):
    """Self-attention then feed-forward, each with a residual connection and LayerNorm."""

    def __init__(self, d_model: int, heads: int, ff_dim: int, *, dropout: float = 0.0,
                 attn_dropout: float = 0.0, pre_norm: bool = True, activation: str = "relu",
                 ff_dropout: float | None = None):
        super().__init__(dropout, pre_norm)
        self.self_attn = MultiHeadAttention(d_model, heads, attn_dropout)
        self.self_attn_norm = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, ff_dim, dropout if ff_dropout is None else ff_dropout, activation)
        self.ff_norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x (batch, src_len, hidden), src_mask (batch, src_len) True = real -> (batch, src_len, hidden)."""
        h = self.sublayer_input(x, self.self_attn_norm)
        out = self.self_attn(h, h, h, src_mask, need_weights=False).context
        x = self.residual(x, out, self.self_attn_norm)
        h = self.sublayer_input(x, self.ff_norm)
        return self.residual(x, self.feed_forward(h), self.ff_norm)


class DecoderLayer(_Sublayers):
    """Masked self-attention, cross-attention over the encoder states, feed-forward."""

    def __init__(self, d_model: int, heads: int, ff_dim: int, *, dropout: float = 0.0,
                 attn_dropout: float = 0.0, pre_norm: bool = True, activation: str = "relu",
                 ff_dropout: float | None = None):
        super().__init__(dropout, pre_norm)
        self.self_attn = MultiHeadAttention(d_model, heads, attn_dropout)
        self.self_attn_norm = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, heads, attn_dropout)
        self.cross_attn_norm = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, ff_dim, dropout if ff_dropout is None else ff_dropout, activation)
        self.ff_norm = nn.LayerNorm(d_model)

    def forward(self, x: Tensor, cross_kv: KV, src_mask: Tensor, *, cache: KV | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Run the layer on new target positions.

        Args:
            x: (batch, tgt_len, hidden) the new positions (tgt_len = 1 for a cached step).
            cross_kv: encoder states projected by ``cross_attn.project_kv``, each
                (batch, heads, src_len, head_dim).
            src_mask: (batch, src_len) bool, True = real token.
            cache: self-attention k, v, each (batch, heads, t + tgt_len, head_dim): the earlier
                positions, and room for the new ones, which the layer writes in place; None for
                a full pass from position 0 (causal mask, Vaswani et al. 2017 sec. 3.2.3).
            need_weights: return the cross-attention weights (math path).

        Returns:
            x (batch, tgt_len, hidden); cross-attention weights (batch, heads, tgt_len, src_len)
            or None.
        """
        h = self.sublayer_input(x, self.self_attn_norm)
        q, mask = None, None
        if cache is not None:  # decoding: q, k, v in one matmul (outside autograd)
            q, k, v = self.self_attn.project_qkv(h)  # each (batch, heads, tgt_len, head_dim)
            tgt_len = h.shape[1]
            cache[0][:, :, -tgt_len:].copy_(k)
            cache[1][:, :, -tgt_len:].copy_(v)
            k, v = cache  # (batch, heads, t + tgt_len, head_dim)
        else:
            k, v = self.self_attn.project_kv(h)  # (batch, heads, tgt_len, head_dim)
            mask = causal_mask(h.shape[1], h.device)[None]
        # under bf16 autocast k, v are bf16 while LayerNorm gives float32; MHA wants one dtype
        out = self.self_attn(h.to(k.dtype), mask=mask, kv=(k, v), projected_query=q, need_weights=False).context
        x = self.residual(x, out, self.self_attn_norm)
        h = self.sublayer_input(x, self.cross_attn_norm)
        out, weights = self.cross_attn(h.to(cross_kv[0].dtype), mask=src_mask, kv=cross_kv,
                                       need_weights=need_weights, average_heads=False)
        x = self.residual(x, out, self.cross_attn_norm)
        h = self.sublayer_input(x, self.ff_norm)
        return self.residual(x, self.feed_forward(h), self.ff_norm), weights


def _is_source_entry(name: str) -> bool:
    """State entries that depend only on the source sentence, not on the hypothesis."""
    return name == "src_mask" or name.startswith("cross_")


def _cache_capacity(kv: Tensor) -> int:
    """Positions the buffer under a cache view holds: kv (batch, heads, pairs, t, head_dim) is
    read as the first t positions of a contiguous (batch, heads, pairs, capacity, head_dim)
    buffer when its strides and storage say so; otherwise the capacity is t (no room)."""
    batch, heads, pairs, t, head_dim = kv.shape
    capacity = kv.stride(2) // head_dim
    inner = pairs * capacity * head_dim
    view_of_buffer = kv.stride() == (heads * inner, inner, capacity * head_dim, head_dim, 1)
    end = (kv.storage_offset() + batch * heads * inner) * kv.element_size()
    return capacity if view_of_buffer and capacity >= t and end <= kv.untyped_storage().nbytes() else t


def _cache_buffer(kv: Tensor, capacity: int, rows: int | None = None) -> Tensor:
    """An uninitialised (rows, heads, pairs, capacity, head_dim) buffer like kv's (rows: kv's batch)."""
    batch, heads, pairs, _, head_dim = kv.shape
    return kv.new_empty(batch if rows is None else rows, heads, pairs, capacity, head_dim)


def _grow_cache(kv: Tensor, new: int) -> Tensor:
    """kv (batch, heads, pairs, t, head_dim) -> (batch, heads, pairs, t + new, head_dim), the same
    t positions then room for ``new`` more: a longer view of the same buffer when it has room,
    else a copy into one twice the size."""
    t = kv.shape[3]
    if t + new <= _cache_capacity(kv):
        size = (*kv.shape[:3], t + new, kv.shape[4])
        return kv.as_strided(size, kv.stride(), kv.storage_offset())
    buffer = _cache_buffer(kv, max(2 * t, t + new, CACHE_START))
    buffer[:, :, :, :t].copy_(kv)
    return buffer[:, :, :, :t + new]


def _select_cache(kv: Tensor, index: Tensor) -> Tensor:
    """Rows ``index`` (n,) of a cache view, gathered straight into a new buffer of the same
    capacity (one copy of the t filled positions, for all layers at once; two under autograd,
    which ``out=`` does not support)."""
    t = kv.shape[3]
    buffer = _cache_buffer(kv, max(_cache_capacity(kv), CACHE_START), rows=index.shape[0])
    out = buffer[:, :, :, :t]  # (n, heads, pairs, t, head_dim)
    if kv.requires_grad and torch.is_grad_enabled():
        return out.copy_(kv.index_select(0, index))
    return torch.index_select(kv, 0, index, out=out)


class TransformerSeq2Seq(nn.Module):
    """Encoder-decoder Transformer, Vaswani et al. 2017 (sec. 3), with the search interface.

    Args:
        src_vocab, tgt_vocab: vocabulary sizes.
        d_model, heads, ff_dim: residual size, attention heads (must divide d_model), FF size.
        enc_layers, dec_layers: layers in the encoder / decoder stacks.
        dropout: on embeddings + positions, sublayer outputs (before the residual add) and
            inside the feed-forward. attn_dropout: on the attention weights.
        positions: "sinusoidal" (sec. 3.5), "sinusoidal_halves" (the same in Marian's layout:
            sines then cosines) or "learned" (Gehring et al. 2017).
        pre_norm: LayerNorm before each sublayer, plus a final LayerNorm on each stack;
            False = the paper's post-norm.
        share_embeddings: one embedding for source and target (needs src_vocab == tgt_vocab).
        tie_embeddings: the output layer reuses the target embedding (sec. 3.4).
        max_positions: longest sequence the position table covers.
        activation: the feed-forward's nonlinearity, a key of `ACTIVATIONS` ("relu", "gelu", "swish").
        scale_embeddings: multiply token embeddings by sqrt(d_model) (sec. 3.4); False = by 1.
        ff_dropout: dropout after the feed-forward's activation; None = `dropout`.
        pad_id, bos_id, eos_id: special token ids (bos: the decoder's start token; may be pad_id).

    Raises:
        ValueError: bad sizes or choices, or share_embeddings with different vocabulary sizes.
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, *, d_model: int = 256, heads: int = 8,
                 ff_dim: int = 1024, enc_layers: int = 3, dec_layers: int = 3, dropout: float = 0.1,
                 attn_dropout: float = 0.0, positions: str = "sinusoidal", pre_norm: bool = True,
                 share_embeddings: bool = False, tie_embeddings: bool = False,
                 max_positions: int = 1024, activation: str = "relu", scale_embeddings: bool = True,
                 ff_dropout: float | None = None, pad_id: int = 0, bos_id: int = 2, eos_id: int = 3):
        super().__init__()
        if heads <= 0 or d_model % heads:
            raise ValueError(f"heads={heads} must divide d_model={d_model}")
        if min(ff_dim, enc_layers, dec_layers, max_positions) <= 0:
            raise ValueError(f"ff_dim={ff_dim}, enc_layers={enc_layers}, dec_layers={dec_layers} "
                             f"and max_positions={max_positions} must be positive")
        if not (0.0 <= dropout < 1.0 and 0.0 <= attn_dropout < 1.0 and (ff_dropout is None or 0.0 <= ff_dropout < 1.0)):
            raise ValueError(f"dropout={dropout}, attn_dropout={attn_dropout} and ff_dropout={ff_dropout} "
                             f"must be in [0, 1)")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATIONS)}; got {activation!r}")
        if positions not in POSITION_TYPES:
            raise ValueError(f"positions must be one of {POSITION_TYPES}; got {positions!r}")
        if share_embeddings and src_vocab != tgt_vocab:
            raise ValueError(f"share_embeddings needs equal vocabulary sizes; got src_vocab="
                             f"{src_vocab}, tgt_vocab={tgt_vocab} (use a joint vocabulary)")
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.d_model, self.heads, self.pre_norm = d_model, heads, pre_norm
        self.positions, self.max_positions = positions, max_positions
        self.activation = activation
        self.embed_scale = math.sqrt(d_model) if scale_embeddings else 1.0  # sec. 3.4: times sqrt(d_model)
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = (self.src_embed if share_embeddings
                          else nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id))
        if positions == "learned":
            self.pos_embed = nn.Embedding(max_positions, d_model)
        else:  # not saved with the weights: rebuilt from the formula
            self.register_buffer("pos_table", sinusoidal_positions(
                max_positions, d_model, halves=positions == "sinusoidal_halves"), persistent=False)
        self.dropout = Dropout(dropout)
        layer_args = dict(dropout=dropout, attn_dropout=attn_dropout, pre_norm=pre_norm, activation=activation,
                          ff_dropout=ff_dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, heads, ff_dim, **layer_args) for _ in range(enc_layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, heads, ff_dim, **layer_args) for _ in range(dec_layers))
        self.encoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.generator = nn.Linear(d_model, tgt_vocab)
        self._reset_parameters()
        if tie_embeddings:
            self.generator.weight = self.tgt_embed.weight
        self.attention_layer: int | None = None
        self.attention_head: int | None = None

    def _reset_parameters(self) -> None:
        """Xavier-uniform projections, zero biases; embeddings N(0, d_model^-1/2), zero pad row."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=self.d_model ** -0.5)
                if module.padding_idx is not None:
                    with torch.no_grad():
                        module.weight[module.padding_idx].zero_()

    def set_attention_view(self, *, layer: int | None = None, head: int | None = None) -> None:
        """Pick the cross-attention that ``decode_step`` and ``forward(need_attention=True)``
        report: one decoder layer or the mean over layers (None), one head or the mean (None).
        Negative indices count from the end.

        Raises:
            ValueError: layer or head out of range.
        """
        layers = len(self.decoder_layers)
        if layer is not None and not -layers <= layer < layers:
            raise ValueError(f"layer={layer} out of range for {layers} decoder layers")
        if head is not None and not -self.heads <= head < self.heads:
            raise ValueError(f"head={head} out of range for {self.heads} heads")
        self.attention_layer = None if layer is None else layer % layers
        self.attention_head = None if head is None else head % self.heads

    def _embed(self, embedding: nn.Embedding, ids: Tensor, offset: int = 0) -> Tensor:
        """Scaled token embeddings plus the positions offset .. offset+len-1 (sec. 3.4, 3.5).

        (batch, len) ids -> (batch, len, hidden). Raises ValueError past ``max_positions``.
        """
        end = offset + ids.shape[1]
        if end > self.max_positions:
            raise ValueError(f"position {end - 1} is beyond max_positions={self.max_positions}")
        if self.positions == "learned":
            pos = self.pos_embed(torch.arange(offset, end, device=ids.device))  # (len, hidden)
        else:
            pos = self.pos_table[offset:end]  # (len, hidden)
        return self.dropout(embedding(ids) * self.embed_scale + pos)

    def encode(self, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor) -> EncoderOutput:
        """Run the encoder stack.

        Args:
            src_ids: (batch, src_len) long, padded with pad_id.
            src_mask: (batch, src_len) bool, True = real token.
            src_lengths: (batch,) long (only checked; the mask says where padding is).

        Returns:
            EncoderOutput(states (batch, src_len, hidden), mask, final=None): the Transformer
            has no single final state.

        Raises:
            ValueError: shapes disagree.
        """
        check_source(src_ids, src_mask, src_lengths)
        x = self._embed(self.src_embed, src_ids)  # (batch, src_len, hidden)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return EncoderOutput(self.encoder_norm(x), src_mask, None)

    def init_state(self, enc: EncoderOutput) -> State:
        """Decoder state, batch on dim 0: src_mask; per layer i the cross-attention
        ``cross_k.i``/``cross_v.i`` (projected once here), each (batch, heads, src_len, head_dim);
        and ``self_kv`` (batch, heads, 2 * layers, 0, head_dim), the empty self-attention cache
        (layer i's k at 2i, v at 2i + 1), a view of a buffer with room for ``CACHE_START`` steps."""
        state = {"src_mask": enc.mask}
        batch, head_dim = enc.states.shape[0], self.d_model // self.heads
        for i, layer in enumerate(self.decoder_layers):
            k, v = layer.cross_attn.project_kv(enc.states)  # (batch, heads, src_len, head_dim)
            # contiguous once here: the heads view would make every step's matmul copy k and v
            state[f"cross_k.{i}"], state[f"cross_v.{i}"] = k.contiguous(), v.contiguous()
        pairs = 2 * len(self.decoder_layers)
        buffer = enc.states.new_empty(batch, self.heads, pairs, CACHE_START, head_dim)
        state["self_kv"] = buffer[:, :, :, :0]  # (batch, heads, 2 * layers, 0, head_dim)
        return state

    def _decode(self, tgt_in: Tensor, state: State, *, need_attention: bool, cached: bool
                ) -> tuple[Tensor, State, Tensor | None]:
        """Decoder stack over new target positions; see ``decode_step`` and ``forward``."""
        offset = state["self_kv"].shape[3] if cached else 0
        x = self._embed(self.tgt_embed, tgt_in, offset)  # (batch, tgt_len, hidden)
        new_state, weights = dict(state), []
        if cached:  # (batch, heads, 2 * layers, offset + tgt_len, head_dim), filled by the layers
            new_state["self_kv"] = kv = _grow_cache(state["self_kv"], tgt_in.shape[1])
        for i, layer in enumerate(self.decoder_layers):
            want = need_attention and self.attention_layer in (None, i)
            cache = (kv[:, :, 2 * i], kv[:, :, 2 * i + 1]) if cached else None
            cross_kv = (state[f"cross_k.{i}"], state[f"cross_v.{i}"])
            x, w = layer(x, cross_kv, state["src_mask"], cache=cache, need_weights=want)
            if want:
                weights.append(w)  # (batch, heads, tgt_len, src_len)
        logits = self.generator(self.decoder_norm(x))  # (batch, tgt_len, vocab)
        if not need_attention:
            return logits, new_state, None
        attn = torch.stack(weights, dim=1)  # (batch, layers, heads, tgt_len, src_len)
        attn = attn.mean(dim=2) if self.attention_head is None else attn[:, :, self.attention_head]
        return logits, new_state, attn.mean(dim=1)  # (batch, tgt_len, src_len)

    def decode_step(self, prev_ids: Tensor, state: State) -> tuple[Tensor, State, Tensor]:
        """One decoder step with the key/value cache.

        Args:
            prev_ids: (batch,) previous target tokens (bos at the first step).
            state: from ``init_state`` or the previous step.

        Returns:
            logits (batch, vocab), the new state (caches one position longer), cross-attention
            weights (batch, src_len) as chosen by ``set_attention_view``. The new position is
            written into the buffer under ``state["self_kv"]``, past the end of the state given:
            decode a state once (search does), or ``reorder_state`` it first, which copies.

        Raises:
            ValueError: prev_ids is not (batch,).
        """
        batch = state["src_mask"].shape[0]
        if prev_ids.dim() != 1 or prev_ids.shape[0] != batch:
            raise ValueError(f"prev_ids must be (batch,) with batch={batch}; got {tuple(prev_ids.shape)}")
        logits, state, attn = self._decode(prev_ids.unsqueeze(1), state, need_attention=True,
                                           cached=True)  # logits (batch, 1, vocab)
        return logits.squeeze(1), state, attn.squeeze(1)  # (batch, vocab), (batch, src_len)

    @staticmethod
    def reorder_state(state: State, index: Tensor, *, within_sentences: bool = False) -> State:
        """Select rows (beams) of every state tensor: index (n,) -> each tensor (n, ...).

        ``within_sentences=True`` promises that every row is taken from a row of its own
        sentence, and that all rows of a sentence hold the same source (beam search reordering
        the hypotheses of an unchanged set of sentences): the source side (``src_mask``,
        ``cross_k.i``, ``cross_v.i``) is then kept as it is instead of copied. The self-attention
        cache is gathered straight into a new buffer with the same room for further steps.
        """
        return {name: value if within_sentences and _is_source_entry(name)
                else _select_cache(value, index) if name == "self_kv"
                else value.index_select(0, index) for name, value in state.items()}

    def forward(self, src_ids: Tensor, src_mask: Tensor, src_lengths: Tensor, tgt_in: Tensor, *,
                teacher_forcing: float = 1.0, need_attention: bool = False) -> ModelOutput:
        """Score a whole target at once (causal self-attention, SDPA unless attention is asked).

        Args:
            src_ids, src_mask, src_lengths: (batch, src_len), (batch, src_len), (batch,).
            tgt_in: (batch, tgt_len) long, <bos> y1 .. yn (padded).
            teacher_forcing: accepted for the shared training loop and ignored (always 1).
            need_attention: also return the cross-attention chosen by ``set_attention_view``.

        Returns:
            ModelOutput(logits (batch, tgt_len, vocab), attention (batch, tgt_len, src_len)
            or None).

        Raises:
            ValueError: bad shapes.
        """
        if tgt_in.dim() != 2 or tgt_in.shape[0] != src_ids.shape[0]:
            raise ValueError(f"tgt_in must be (batch, tgt_len) with batch={src_ids.shape[0]}; "
                             f"got {tuple(tgt_in.shape)}")
        state = self.init_state(self.encode(src_ids, src_mask, src_lengths))
        logits, _, attn = self._decode(tgt_in, state, need_attention=need_attention, cached=False)
        return ModelOutput(logits, attn)
