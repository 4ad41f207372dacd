"""Raw text in: sources, given translations, target prefixes and terminology constraints
tokenized and cut by the same rules for every engine (the decoding settings' rules are
DecodingOptions', decoding/options.py).

Any input is accepted: empty or whitespace-only lines give an empty translation, words unknown
to the vocabulary become <unk>, and inputs longer than `search.max_input_tokens` tokens are cut
there with a warning (and at MAX_CHARS_PER_TOKEN characters per allowed token before tokenizing).
"""

from __future__ import annotations

import logging
from typing import Sequence

from attnmt.bounds import CONSTRAINTS
from attnmt.config import SearchConfig
from attnmt.data.encode import MAX_CHARS_PER_TOKEN
from attnmt.data.pipeline import TextPipeline
from attnmt.data.tokenizers import Tokenizer
from attnmt.data.vocab import Vocab

log = logging.getLogger(__name__)

# Inputs are cut at search.max_input_tokens tokens; before tokenizing, at MAX_CHARS_PER_TOKEN
# characters per allowed token (data.encode's: the training filter's), so that a megabyte on one
# line costs no more than a long sentence.


def encode_texts(tokenizer: Tokenizer, vocab: Vocab, texts: Sequence[str], search_cfg: SearchConfig,
                 warnings: list[list[str]] | None = None, *, quiet: bool = False
                 ) -> tuple[list[list[str]], list[list[int]]]:
    """Tokenize raw texts for decoding or scoring, cut to search.max_input_tokens (and, before
    tokenizing, to a character bound); returns (tokens, ids) per text.

    Each cut is logged (not when `quiet`: a second reading of texts already read) and, when
    `warnings` is given (one list per text), also appended there.
    """
    all_tokens, all_ids = [], []
    max_chars = MAX_CHARS_PER_TOKEN * search_cfg.max_input_tokens
    for i, text in enumerate(texts):
        notes: list[str] = []
        if text and len(text) > max_chars:  # bound the tokenizer's work on absurd inputs
            notes.append(f"input has {len(text)} characters: cut to {max_chars} before tokenizing")
            text = text[:max_chars]
        tokens = tokenizer.tokenize(text) if text and text.strip() else []
        if len(tokens) > search_cfg.max_input_tokens:
            notes.append(f"input has {len(tokens)} tokens: cut to search.max_input_tokens="
                         f"{search_cfg.max_input_tokens}")
            tokens = tokens[: search_cfg.max_input_tokens]
        for note in notes if not quiet else ():
            log.warning("input %d: %s", i, note)
        if warnings is not None:
            warnings[i].extend(notes)
        all_tokens.append(tokens)
        all_ids.append(vocab.encode(tokens))
    return all_tokens, all_ids


def encode_sources(pipeline: TextPipeline, sentences: Sequence[str], search_cfg: SearchConfig,
                   warnings: list[list[str]] | None = None, *, quiet: bool = False
                   ) -> tuple[list[list[str]], list[list[int]]]:
    """`encode_texts` with the pipeline's source tokenizer and vocabulary; with the pipeline's
    `source_eos` (Marian), a non-empty source ends with the eos token, shown among its tokens."""
    tokens, ids = encode_texts(pipeline.src_tokenizer, pipeline.src_vocab, sentences, search_cfg, warnings,
                               quiet=quiet)
    if pipeline.source_eos:
        vocab = pipeline.src_vocab
        tokens = [t + [vocab.EOS] if t else t for t in tokens]
        ids = [i + [vocab.eos_id] if i else i for i in ids]
    return tokens, ids


def budget_lengths(pipeline: TextPipeline, sentences: Sequence[str], src_ids: Sequence[Sequence[int]],
                   search_cfg: SearchConfig, extra: int = 0) -> list[int]:
    """The source length each sentence's output budget counts (search.max_len_ratio x it +
    search.max_len_offset): its ids (`src_ids`, encode_sources'), or, where fewer, the ids of the
    same sentence in lower case, plus `extra` (a multilingual model's language ids before it).

    A vocabulary learned on sentence-case text cuts a word in capitals into pieces of one or two
    letters: "EIN MANN" is three to five times the tokens of "ein mann", and a budget counted on
    them lets a model that never saw capitals run on for that many more steps (docs/results.md,
    "student_tiny"). Counted in lower case, a page of capitals gets the budget of the same page of
    text; any other text changes by a token or two at most, never upwards. Not for a model taught to
    answer capitals in capitals (search.budget_in_lower_case false: its answer needs the pieces
    too): then each sentence's own ids count."""
    lengths = [len(ids) + extra if ids else 0 for ids in src_ids]
    if search_cfg.budget_in_lower_case is False:
        return lengths
    changed = [i for i, text in enumerate(sentences) if lengths[i] and text.lower() != text]
    _, folded = encode_sources(pipeline, [sentences[i].lower() for i in changed], search_cfg, quiet=True)
    for i, ids in zip(changed, folded):
        lengths[i] = min(lengths[i], len(ids) + extra)
    return lengths


def encode_targets(pipeline: TextPipeline, targets: Sequence[str], search_cfg: SearchConfig,
                   warnings: list[list[str]] | None = None) -> tuple[list[list[str]], list[list[int]]]:
    """`encode_texts` with the target side's: given translations are cut where a source would be."""
    return encode_texts(pipeline.tgt_tokenizer, pipeline.tgt_vocab, targets, search_cfg, warnings)


def check_prefixes(target_prefix, count: int) -> list[str | None]:
    """`target_prefix` as one text or None per sentence (None: no prefixes).

    Raises:
        ValueError: not a list of `count` texts or None, naming target_prefix.
    """
    if target_prefix is None:
        return [None] * count
    if isinstance(target_prefix, str) or not isinstance(target_prefix, Sequence) or len(target_prefix) != count:
        raise ValueError(f"target_prefix must be a list of one text (or None) per sentence: {count} sentences")
    if not all(p is None or isinstance(p, str) for p in target_prefix):
        raise ValueError("target_prefix must hold texts or None")
    return list(target_prefix)


def encode_prefixes(pipeline: TextPipeline, target_prefix, count: int, search_cfg: SearchConfig,
                    warnings: list[list[str]]) -> list[list[int]]:
    """Target prefixes (check_prefixes) as target ids, cut like sources; [] where there is none."""
    prefixes = check_prefixes(target_prefix, count)
    _, ids = encode_targets(pipeline, [p or "" for p in prefixes], search_cfg, warnings)
    return ids


def _is_phrase_pair(item) -> bool:
    return (isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2
            and all(isinstance(side, str) for side in item))


def check_constraints(constraints, count: int) -> list[list]:
    """`constraints` as one list per sentence (None: none) of target phrases (str) or
    (source phrase, target phrase) pairs.

    Raises:
        ValueError: not a list of `count` lists of phrases or pairs, naming constraints.
    """
    if constraints is None:
        return [[] for _ in range(count)]
    if isinstance(constraints, str) or not isinstance(constraints, Sequence) or len(constraints) != count:
        raise ValueError(f"constraints must be a list of one list (or None) per sentence: {count} sentences")
    checked = []
    for items in constraints:
        if items is None:
            items = []
        if isinstance(items, str) or not isinstance(items, Sequence):
            raise ValueError("constraints must hold, per sentence, a list of target phrases or "
                             "(source phrase, target phrase) pairs")
        for item in items:
            if not (isinstance(item, str) or _is_phrase_pair(item)):
                raise ValueError(f"constraints: {item!r} is neither a target phrase nor a "
                                 f"(source phrase, target phrase) pair")
        checked.append(list(items))
    return checked


def _contains(tokens: list[str], phrase: list[str]) -> bool:
    n = len(phrase)
    return n > 0 and any(tokens[i:i + n] == phrase for i in range(len(tokens) - n + 1))


def applicable_constraints(pipeline: TextPipeline, sentences: Sequence[str], constraints, search_cfg: SearchConfig
                           ) -> list[list[str]]:
    """Per sentence, the target phrases to force: every target phrase given for it, and the target
    side of each (source, target) pair whose source phrase (tokenized like the sentence) occurs in it
    as a run of whole tokens; repeats once, empty phrases dropped, in the order given."""
    per_sentence = check_constraints(constraints, len(sentences))
    if not any(per_sentence):
        return [[] for _ in sentences]
    src_tokens, _ = encode_sources(pipeline, sentences, search_cfg)
    source_phrases: dict[str, list[str]] = {}  # a glossary's source phrases, tokenized once per call
    phrases = []
    for tokens, items in zip(src_tokens, per_sentence):
        chosen: list[str] = []
        for item in items:
            if not isinstance(item, str):
                source, item = item
                if source not in source_phrases:
                    source_phrases[source] = pipeline.src_tokenizer.tokenize(source) if source.strip() else []
                if not _contains(tokens, source_phrases[source]):
                    continue
            if item.strip() and item not in chosen:
                chosen.append(item)
        if len(chosen) > CONSTRAINTS.high:
            raise ValueError(f"constraints: {len(chosen)} apply to one sentence; at most {CONSTRAINTS.high}")
        phrases.append(chosen)
    return phrases


def encode_constraints(pipeline: TextPipeline, constraints: Sequence[Sequence[str]] | None, count: int,
                       search_cfg: SearchConfig) -> tuple[list[list[list[str]]], list[list[list[int]]]]:
    """Target phrases per sentence (applicable_constraints' output, or None) -> their tokens and ids
    per sentence, each phrase once (by ids), empty ones dropped."""
    if constraints is None:
        return [[] for _ in range(count)], [[] for _ in range(count)]
    if len(constraints) != count:
        raise ValueError(f"constraints must be a list of one list per sentence: {count} sentences")
    all_tokens, all_ids = [], []
    for phrases in constraints:
        tokens, ids = encode_targets(pipeline, list(phrases), search_cfg)
        kept_tokens, kept_ids = [], []
        for t, i in zip(tokens, ids):
            if i and i not in kept_ids:
                kept_tokens.append(t)
                kept_ids.append(i)
        all_tokens.append(kept_tokens)
        all_ids.append(kept_ids)
    return all_tokens, all_ids


def unknown_target_words(pipeline: TextPipeline, phrases: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The target phrases with tokens the target vocabulary lacks, and those tokens: forced as
    <unk>, they cannot appear as typed (what a glossary user must be told)."""
    vocab = pipeline.tgt_vocab
    found = []
    for phrase in phrases:
        tokens = pipeline.tgt_tokenizer.tokenize(phrase)
        unknown = [t for t, i in zip(tokens, vocab.encode(tokens)) if i == vocab.unk_id]
        if unknown:
            found.append((phrase, unknown))
    return found


def prepare_pairs(pipeline: TextPipeline, sources: Sequence[str], targets: Sequence[str], search_cfg: SearchConfig):
    """Tokenize (source, translation) pairs for scoring: (src_tokens, src_ids, tgt_tokens, tgt_ids, warnings).

    Raises:
        ValueError: different numbers of sources and translations.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} translations to score")
    warnings: list[list[str]] = [[] for _ in sources]
    src_tokens, src_ids = encode_sources(pipeline, sources, search_cfg, warnings)
    tgt_tokens, tgt_ids = encode_targets(pipeline, targets, search_cfg, warnings)
    return src_tokens, src_ids, tgt_tokens, tgt_ids, warnings


# what the service's warnings (and translate --report) say of a result at_length_bound: the model did
# not end it (an eos) within its budget
LENGTH_BOUND_NOTE = ("the translation was cut at its length bound (search.max_len_ratio x the source's tokens, "
                     "counted in lower case where fewer, + search.max_len_offset): the model did not end it")
