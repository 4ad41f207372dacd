"""The text <-> ids pipeline of one run: tokenizers and vocabularies, saved with the run.

`data.prepare` trains whatever needs training (sentencepiece models, vocabularies) on the
training data; `save` / `load` keep it in the prepared folder and in the run directory as JSON
plus sentencepiece model files, so that a trained model translates with exactly the
tokenization it was trained with. A multilingual model's pipeline also holds its `Languages`
(languages.py): the directions, the language tokens in the vocabulary and where they go.
`source_eos` (an imported Marian model's convention) ends every source with the eos token. A run
trained here also keeps its training data's source words (`lexicon`, lexicon.py), with which the
translator reads a text typed in capitals or with a slip as the model would want it.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from attnmt.files import read_json, sha256_file, write_json
from attnmt.data.corpus import ParallelCorpus
from attnmt.data.languages import Languages, is_lang_token, lang_token
from attnmt.data.lexicon import LEXICON_FILE, Lexicon, Lexicons, load_lexicon
from attnmt.data.tokenizers import WORD_START, SentencePieceTokenizer, Tokenizer, tokenizer_from_dict
from attnmt.data.vocab import Vocab
from attnmt.errors import DataError

log = logging.getLogger(__name__)

# tokens that are never words, whatever vocabulary a model has (attnmt's and Marian's specials)
NEVER_WORDS = frozenset(Vocab.SPECIALS) | {"<s>", "</s>"}


@dataclass
class TextPipeline:
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    src_vocab: Vocab
    tgt_vocab: Vocab
    languages: Languages | None = None  # a multilingual model's (None: one direction)
    source_eos: bool = False  # every source ends with src_vocab's eos token (Marian); attnmt's own: no
    lexicon: Lexicon | Lexicons | None = None  # the training data's source words (lexicon.py; a multilingual
                                               # run's per source language): case and slips mended

    # ------------------------------------------------------------------ use
    def language_ids(self, target_lang: str | None) -> tuple[list[int], list[int]]:
        """The ids that tell the model to write `target_lang`: (put before the source ids, forced
        first in the output); ([], []) for a one-direction model.

        Raises:
            DataError: a multilingual model whose placement is not chosen, or a language it lacks.
        """
        if self.languages is None or target_lang is None:
            return [], []
        token = lang_token(target_lang)
        if token not in self.tgt_vocab:
            raise DataError(f"the vocabulary has no token {token}: this model writes "
                            f"{', '.join(sorted({t for _, t in self.languages.directions}))}")
        if self.languages.placement is None:
            raise DataError("the language token's place is not chosen (prepared data: data.lang_token)")
        ids = [self.tgt_vocab.stoi[token]]
        return (ids, []) if self.languages.placement == "source" else ([], ids)

    def encode_source(self, text: str, target_lang: str | None = None) -> list[int]:
        before, _ = self.language_ids(target_lang)
        return before + self.src_vocab.encode(self.src_tokenizer.tokenize(text), add_eos=self.source_eos)

    def encode_target(self, text: str, target_lang: str | None = None) -> list[int]:
        _, first = self.language_ids(target_lang)
        return first + self.tgt_vocab.encode(self.tgt_tokenizer.tokenize(text))

    def decode_target(self, ids: list[int]) -> tuple[list[str], str]:
        """Target ids -> (tokens, the text a user sees: `target_text`)."""
        tokens = self.tgt_vocab.decode(ids)
        return tokens, self.target_text(tokens)

    def target_text(self, tokens: Sequence[str]) -> str:
        """Output tokens -> the text a user sees: the one place this happens (both engines, the
        Translator after <unk> replacement; so the CLI, the service and every route).

        Whatever the model emits, no special token reaches the text: the target vocabulary's
        pad, bos, eos and unk (an <unk> left unreplaced stands for no word; `tokens` keep it),
        `</s>`, `<s>` and language tokens (<2en>). Sentencepiece text is MarianTokenizer's
        (`decode(ids, skip_special_tokens=True)`): the pieces decoded, then every word marker
        "▁" left (a piece of a joint vocabulary that the target model lacks is decoded as it is
        written, marker and all) turned into a space, and the text stripped. A Moses token that is
        only markers is dropped.
        """
        vocab = self.tgt_vocab
        hidden = NEVER_WORDS | {vocab.PAD, vocab.UNK, vocab.BOS, vocab.EOS}
        words = [t for t in tokens if t not in hidden and not is_lang_token(t)]
        if not isinstance(self.tgt_tokenizer, SentencePieceTokenizer):
            words = [t for t in words if t.strip(WORD_START)]
        return self.tgt_tokenizer.detokenize(words).replace(WORD_START, " ").strip()

    def encode_corpus(self, corpus: ParallelCorpus, target_lang: str | None = None) -> list[tuple[list[int], list[int]]]:
        """Encode every pair of a (small, in-memory) corpus: validation and test sets (a
        multilingual model's: with the target language's token). Training data is encoded once
        by `data.prepare`."""
        return [(self.encode_source(s, target_lang), self.encode_target(t, target_lang))
                for s, t in zip(corpus.src, corpus.tgt)]

    def with_placement(self, placement: str) -> TextPipeline:
        """This pipeline with its language tokens' place chosen (a one-direction pipeline: itself)."""
        if self.languages is None:
            return self
        return dataclasses.replace(self, languages=self.languages.with_placement(placement))

    def with_lexicon(self, lexicon: Lexicon | Lexicons | None) -> TextPipeline:
        """This pipeline with the source words of its training data (saved as lexicon.json)."""
        return dataclasses.replace(self, lexicon=lexicon)

    # ------------------------------------------------------------------ persistence
    def save(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        settings = {}
        for side, tok in (("src", self.src_tokenizer), ("tgt", self.tgt_tokenizer)):
            if isinstance(tok, SentencePieceTokenizer):
                tok = tok.copy_model_to(run_dir)
            settings[side] = tok.to_dict()
        if self.languages is not None:
            settings["languages"] = self.languages.to_dict()
        if self.source_eos:
            settings["source_eos"] = True
        write_json(run_dir / "tokenizers.json", settings)
        self.src_vocab.save(run_dir / "vocab.src.json")
        self.tgt_vocab.save(run_dir / "vocab.tgt.json")
        if self.lexicon is not None:
            self.lexicon.save(run_dir)

    @classmethod
    def load(cls, run_dir: Path) -> TextPipeline:
        run_dir = Path(run_dir)
        path = run_dir / "tokenizers.json"
        settings = read_json(path, DataError)
        if not isinstance(settings, dict) or not all(isinstance(settings.get(side), dict) for side in ("src", "tgt")):
            raise DataError(f"{path}: expected {{\"src\": {{...}}, \"tgt\": {{...}}}} tokenizer settings")
        languages = None if "languages" not in settings else Languages.from_dict(settings["languages"], str(path))
        if not isinstance(settings.get("source_eos", False), bool):
            raise DataError(f"{path}: source_eos must be true or false, got {settings['source_eos']!r:.60}")
        return cls(
            tokenizer_from_dict(settings["src"], run_dir, source=f"{path}: src"),
            tokenizer_from_dict(settings["tgt"], run_dir, source=f"{path}: tgt"),
            Vocab.load(run_dir / "vocab.src.json"),
            Vocab.load(run_dir / "vocab.tgt.json"),
            languages,
            source_eos=settings.get("source_eos", False),
            lexicon=load_lexicon(run_dir / LEXICON_FILE) if (run_dir / LEXICON_FILE).is_file() else None,
        )


# ---------------------------------------------------------------------- comparing two runs' pipelines

def _tokenizer_identity(tok: Tokenizer) -> dict:
    """What decides how a tokenizer splits text: its settings, and a sentencepiece model's content."""
    if isinstance(tok, SentencePieceTokenizer):
        return {"type": "sentencepiece", "model sha256": sha256_file(tok.model_file), "lowercase": tok.lowercase}
    return tok.to_dict()


def _vocab_difference(a: Vocab, b: Vocab) -> str:
    """The first place two vocabularies differ, in words."""
    for i, (x, y) in enumerate(zip(a.itos, b.itos)):
        if x != y:
            return f"id {i} is {x!r} in the first, {y!r} in the second"
    return f"{len(a)} tokens against {len(b)}"


def pipeline_difference(a: TextPipeline, b: TextPipeline, *, placement: bool = True) -> str | None:
    """How two pipelines would encode or decode differently, in words; None when they are the same
    (same tokenizer settings and sentencepiece models, same vocabularies, id for id, the same
    directions and, with `placement`, the same place of the language tokens)."""
    langs_a, langs_b = (None if p.languages is None else p.languages.to_dict() for p in (a, b))
    if not placement and langs_a and langs_b:
        langs_a, langs_b = ({**langs_a, "placement": None}, {**langs_b, "placement": None})
    if langs_a != langs_b:
        return f"their languages differ ({langs_a} and {langs_b})"
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
