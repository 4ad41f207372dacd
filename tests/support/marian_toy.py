"""Tiny random Marian (OPUS-MT layout) models, built locally with `transformers`: config.json,
model.safetensors, source.spm, target.spm (sentencepiece trained here on the toy corpus),
vocab.json in Marian's order (</s>=0, <unk>=1, pieces, <pad> last) and tokenizer_config.json.

Every weight is drawn at random (standard deviation `std`, LayerNorms and the output bias
included), so that a tensor mapped to the wrong place changes the outputs, and the output
distributions are peaked enough that search has no near-ties. The pad row of the embeddings
stays zero, as in OPUS-MT models.
"""

from __future__ import annotations

import json
from pathlib import Path

from support import toy

SOURCES = [src for src, _ in toy.copy_pairs(300, seed=5)]
TARGETS = [tgt for _, tgt in toy.copy_pairs(300, seed=5)]
SENTENCES = ["Hund rot .", "Katze blau haus baum .", "Mann frau kind", "Wasser groß klein ball auto .",
             "Zebra hund", "Baum"]  # "Zebra": pieces the toy vocabulary lacks


def _train_spm(texts: list[str], prefix: Path, vocab_size: int) -> Path:
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=str(prefix), vocab_size=vocab_size,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2)
    model = prefix.with_suffix(".spm")
    prefix.with_suffix(".model").rename(model)
    prefix.with_suffix(".vocab").unlink()
    return model


def marian_vocab(folder: Path) -> list[str]:
    """Marian's token list: </s>, <unk>, the source then the target model's pieces, <pad> last."""
    import sentencepiece as spm

    tokens = ["</s>", "<unk>"]
    for side in ("source", "target"):
        sp = spm.SentencePieceProcessor(model_file=str(folder / f"{side}.spm"))
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if not (sp.is_control(i) or sp.is_unknown(i)) and piece not in tokens:
                tokens.append(piece)
    return tokens + ["<pad>"]


def write_marian(folder: Path, *, seed: int = 0, d_model: int = 16, heads: int = 2, ff_dim: int = 32,
                 layers: int = 2, activation: str = "swish", share: bool = True, tie: bool = True,
                 scale_embedding: bool = True, std: float = 0.5, bad_words: bool = True,
                 max_positions: int = 128, train_steps: int = 0) -> Path:
    """Write a tiny random MarianMTModel folder; with `train_steps`, trained that many Adam steps on
    the toy copy task first (so that it translates, ends with </s> and its attention aligns)."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    folder.mkdir(parents=True, exist_ok=True)
    _train_spm(SOURCES, folder / "source", 40)
    _train_spm(TARGETS, folder / "target", 40)
    tokens = marian_vocab(folder)
    pad = len(tokens) - 1
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}, ensure_ascii=False),
                                       encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "de", "target_lang": "en"}),
                                                  encoding="utf-8")
    config = MarianConfig(
        vocab_size=len(tokens), decoder_vocab_size=len(tokens), d_model=d_model, encoder_layers=layers,
        decoder_layers=layers, encoder_attention_heads=heads, decoder_attention_heads=heads,
        encoder_ffn_dim=ff_dim, decoder_ffn_dim=ff_dim, activation_function=activation,
        max_position_embeddings=max_positions, scale_embedding=scale_embedding, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=None, share_encoder_decoder_embeddings=share,
        tie_word_embeddings=tie, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    if bad_words:  # as OPUS-MT models say (transformers 5 keeps it in generation_config.json)
        model.generation_config.bad_words_ids = [[pad]]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name and name.endswith("weight"):
                param.normal_(1.0, std)
            elif "embed_positions" not in name:
                param.normal_(0.0, std)
        model.final_logits_bias.normal_(0.0, std)
        for embedding in {id(e): e for e in (model.model.encoder.embed_tokens,
                                             model.model.decoder.embed_tokens)}.values():
            embedding.weight[pad].zero_()
    if train_steps:
        _train(model, folder, train_steps, seed)
    model.save_pretrained(folder)
    return folder


def _train(model, folder: Path, steps: int, seed: int) -> None:
    """Adam on the toy pairs with transformers' own loss (labels shifted right from the pad token);
    the pairs are tokenized once."""
    import torch
    from transformers import MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(folder)
    data = tokenizer(SOURCES, text_target=TARGETS, padding=True, return_tensors="pt")
    data["labels"] = data["labels"].masked_fill(data["labels"] == tokenizer.pad_token_id, -100)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(steps):
        pick = torch.randint(len(SOURCES), (32,), generator=generator)
        loss = model(**{name: tensor[pick] for name, tensor in data.items()}).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
