"""The text <-> ids pipeline of one run: tokenizers and vocabularies, built once, saved with the run.

`TextPipeline.build` trains whatever needs training (sentencepiece models, vocabularies) on the
training split; `save` / `load` keep it in the run directory as JSON plus sentencepiece model
files, so that a trained model translates with exactly the tokenization it was trained with.
`source_eos` (an imported Marian model's convention) ends every source with the eos token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from attnmt.files import read_json, sha256_file, write_json
from attnmt.data.corpus import ParallelCorpus, filter_by_length
from attnmt.data.tokenizers import (
    MosesTokenizer,
    SentencePieceTokenizer,
    Tokenizer,
    tokenizer_from_dict,
    train_sentencepiece,
)
from attnmt.data.vocab import Vocab
from attnmt.errors import DataError

log = logging.getLogger(__name__)

MAX_CHARS_PER_TOKEN = 20  # see encode_corpus


@dataclass
class TextPipeline:
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    src_vocab: Vocab
    tgt_vocab: Vocab
    source_eos: bool = False  # every source ends with src_vocab's eos token (Marian); attnmt's own: no

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, data_cfg, train: ParallelCorpus, *, cache_dir: Path) -> TextPipeline:
        """Train tokenizers (sentencepiece) and build vocabularies on the training corpus."""
        if data_cfg.tokenizer == "moses":
            src_tok: Tokenizer = MosesTokenizer(data_cfg.src_lang, lowercase=data_cfg.lowercase)
            tgt_tok: Tokenizer = MosesTokenizer(data_cfg.tgt_lang, lowercase=data_cfg.lowercase)
        else:
            settings = dict(vocab_size=data_cfg.spm_vocab_size, model_type=data_cfg.spm_model_type,
                            cache_dir=Path(cache_dir))
            if data_cfg.spm_joint:
                model = train_sentencepiece(list(train.src) + list(train.tgt), **settings)
                src_tok = tgt_tok = SentencePieceTokenizer(model)
            else:
                src_tok = SentencePieceTokenizer(train_sentencepiece(list(train.src), **settings))
                tgt_tok = SentencePieceTokenizer(train_sentencepiece(list(train.tgt), **settings))
        src_tokens = [src_tok.tokenize(s) for s in train.src]
        tgt_tokens = [tgt_tok.tokenize(t) for t in train.tgt]
        kwargs = dict(min_freq=data_cfg.min_freq, max_size=data_cfg.max_vocab)
        if data_cfg.tokenizer == "sentencepiece" and data_cfg.spm_joint:
            src_vocab = tgt_vocab = Vocab.build(src_tokens + tgt_tokens, **kwargs)
        else:
            src_vocab = Vocab.build(src_tokens, **kwargs)
            tgt_vocab = Vocab.build(tgt_tokens, **kwargs)
        log.info("vocabularies: %s %d types, %s %d types", data_cfg.src_lang, len(src_vocab),
                 data_cfg.tgt_lang, len(tgt_vocab))
        return cls(src_tok, tgt_tok, src_vocab, tgt_vocab)

    # ------------------------------------------------------------------ use
    def encode_source(self, text: str) -> list[int]:
        return self.src_vocab.encode(self.src_tokenizer.tokenize(text), add_eos=self.source_eos)

    def encode_target(self, text: str) -> list[int]:
        return self.tgt_vocab.encode(self.tgt_tokenizer.tokenize(text))

    def decode_target(self, ids: list[int]) -> tuple[list[str], str]:
        """Target ids -> (tokens, detokenized text)."""
        tokens = self.tgt_vocab.decode(ids)
        return tokens, self.tgt_tokenizer.detokenize(tokens)

    def encode_corpus(self, corpus: ParallelCorpus, *, max_len: int | None = None) -> list[tuple[list[int], list[int]]]:
        """Encode every pair; with `max_len`, drop (and count) pairs longer than that in tokens.

        Pairs with more than `MAX_CHARS_PER_TOKEN * max_len` characters on a side cannot pass the
        token limit in any realistic tokenization; they are dropped before tokenizing (and counted),
        so that a megabyte-long line does not stall the tokenizer.
        """
        pairs = list(zip(corpus.src, corpus.tgt))
        if max_len is not None:
            limit = MAX_CHARS_PER_TOKEN * max_len
            kept = [(s, t) for s, t in pairs if len(s) <= limit and len(t) <= limit]
            if len(kept) < len(pairs):
                log.warning("%s: dropped %d pairs longer than %d characters (data.max_len=%d tokens)",
                            corpus.name, len(pairs) - len(kept), limit, max_len)
            pairs = kept
        src = [self.encode_source(s) for s, _ in pairs]
        tgt = [self.encode_target(t) for _, t in pairs]
        if max_len is not None:
            keep, _dropped = filter_by_length(src, tgt, max_len)
            src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
        return list(zip(src, tgt))

    # ------------------------------------------------------------------ persistence
    def save(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        settings = {}
        for side, tok in (("src", self.src_tokenizer), ("tgt", self.tgt_tokenizer)):
            if isinstance(tok, SentencePieceTokenizer):
                tok = tok.copy_model_to(run_dir)
            settings[side] = tok.to_dict()
        if self.source_eos:
            settings["source_eos"] = True
        write_json(run_dir / "tokenizers.json", settings)
        self.src_vocab.save(run_dir / "vocab.src.json")
        self.tgt_vocab.save(run_dir / "vocab.tgt.json")

    @classmethod
    def load(cls, run_dir: Path) -> TextPipeline:
        run_dir = Path(run_dir)
        path = run_dir / "tokenizers.json"
        settings = read_json(path, DataError)
        if not isinstance(settings, dict) or not all(isinstance(settings.get(side), dict) for side in ("src", "tgt")):
            raise DataError(f"{path}: expected {{\"src\": {{...}}, \"tgt\": {{...}}}} tokenizer settings")
        if not isinstance(settings.get("source_eos", False), bool):
            raise DataError(f"{path}: source_eos must be true or false, got {settings['source_eos']!r:.60}")
        return cls(
            tokenizer_from_dict(settings["src"], run_dir, source=f"{path}: src"),
            tokenizer_from_dict(settings["tgt"], run_dir, source=f"{path}: tgt"),
            Vocab.load(run_dir / "vocab.src.json"),
            Vocab.load(run_dir / "vocab.tgt.json"),
            source_eos=settings.get("source_eos", False),
        )


# ---------------------------------------------------------------------- comparing two runs' pipelines

def _tokenizer_identity(tok: Tokenizer) -> dict:
    """What decides how a tokenizer splits text: its settings, and a sentencepiece model's content."""
    if isinstance(tok, SentencePieceTokenizer):
        return {"type": "sentencepiece", "model sha256": sha256_file(tok.model_file)}
    return tok.to_dict()


def _vocab_difference(a: Vocab, b: Vocab) -> str:
    """The first place two vocabularies differ, in words."""
    for i, (x, y) in enumerate(zip(a.itos, b.itos)):
        if x != y:
            return f"id {i} is {x!r} in the first, {y!r} in the second"
    return f"{len(a)} tokens against {len(b)}"


def pipeline_difference(a: TextPipeline, b: TextPipeline) -> str | None:
    """How two pipelines would encode or decode differently, in words; None when they are the same
    (same tokenizer settings and sentencepiece models, same vocabularies, id for id)."""
    if a.source_eos != b.source_eos:
        return f"one ends sources with eos and the other does not (source_eos {a.source_eos} and {b.source_eos})"
    for side, name in (("tgt", "target"), ("src", "source")):
        vocab_a, vocab_b = getattr(a, f"{side}_vocab"), getattr(b, f"{side}_vocab")
        if vocab_a != vocab_b:
            return (f"their {name} vocabularies differ ({len(vocab_a)} and {len(vocab_b)} tokens; "
                    f"{_vocab_difference(vocab_a, vocab_b)})")
        tok_a, tok_b = (_tokenizer_identity(getattr(p, f"{side}_tokenizer")) for p in (a, b))
        if tok_a != tok_b:
            return f"their {name} tokenizers differ ({tok_a} and {tok_b})"
    return None
