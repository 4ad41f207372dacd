"""Decoding: what every engine shares, raw sentences in and translations out.

    TranslationResult, Alternative, ScoreResult   what `Translator` returns, whatever the engine
    encode_sources / encode_targets              tokenize and cut raw text (the same rules everywhere)
    prepare_pairs                                the same for (source, translation) pairs to score
    check_decoding_args                          the argument rules and bounds both engines share
    replace_unknowns, word_alignment             what attention gives back: <unk> copied from the
                                                 source, source-target word links
    Engine                                       the interface every engine follows

The engines themselves are in engines/: native.py (attnmt's own search over the PyTorch model,
the reference) and ctranslate2.py. Both decode in the order `data.batching.length_sorted_chunks`
gives and return results in input order.

Any input is accepted: empty or whitespace-only lines give an empty translation, words unknown
to the vocabulary become <unk>, and inputs longer than `search.max_input_tokens` tokens are cut
there with a warning (and at MAX_CHARS_PER_TOKEN characters per allowed token before tokenizing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from attnmt.bounds import BEAM, CONSTRAINTS, DECODING_SEED, LENGTH_PENALTY, SAMPLING_TEMPERATURE, SAMPLING_TOPK
from attnmt.config import SearchConfig
from attnmt.data.encode import MAX_CHARS_PER_TOKEN
from attnmt.data.pipeline import TextPipeline
from attnmt.data.tokenizers import Tokenizer
from attnmt.data.vocab import Vocab
from attnmt.errors import DataError

log = logging.getLogger(__name__)

# Inputs are cut at search.max_input_tokens tokens; before tokenizing, at MAX_CHARS_PER_TOKEN
# characters per allowed token (data.encode's: the training filter's), so that a megabyte on one
# line costs no more than a long sentence.

# The decoding arguments' bounds (check_decoding_args) are bounds.py's: the same for a run's
# search settings, the CLI, the Python API and the service.


@dataclass
class Alternative:
    """One entry of an n-best list."""

    text: str                      # detokenized translation
    tokens: list[str]              # output tokens, without <eos>
    score: float                   # model score (length-normalized for beams)
    attention: "object" = field(default=None, repr=False)  # numpy (len(tokens), src_len), None if unknown
    replaced: list[int] = field(default_factory=list)  # positions in tokens whose <unk> was replaced
    alignment: list[tuple[int, int]] | None = None  # (source word, output word) links, when asked
    token_log_probs: list[float] | None = None  # TOKEN_LOG_PROBS_DOC


# What token_log_probs holds, in Alternative and TranslationResult:
TOKEN_LOG_PROBS_DOC = ("each output token's log-probability, then <eos>'s when the search produced it (not when "
                       "the output budget cut it); forced prefix tokens count 0; they sum to the hypothesis' "
                       "log-probability. None: the engine does not give them (CTranslate2)")


@dataclass
class TranslationResult:
    text: str                      # detokenized translation
    tokens: list[str]              # output tokens (words or subwords), without <eos>
    source_tokens: list[str]       # the tokenized (and possibly cut) input
    attention: "object" = field(repr=False)  # numpy array (len(tokens), len(source_tokens))
    score: float = 0.0             # model score of the hypothesis (length-normalized for beams)
    alternatives: list[Alternative] = field(default_factory=list)  # n-best, best first (incl. this one)
    warnings: list[str] = field(default_factory=list)  # e.g. the input was cut
    replaced: list[int] = field(default_factory=list)  # positions in tokens whose <unk> became a source word
    alignment: list[tuple[int, int]] | None = None  # (source word, output word) links, when asked
    token_log_probs: list[float] | None = None  # TOKEN_LOG_PROBS_DOC


@dataclass
class ScoreResult:
    """The model's score of one given translation (forced decoding)."""

    source_tokens: list[str]       # the tokenized (and possibly cut) source
    target_tokens: list[str]       # the tokenized (and possibly cut) translation, without <eos>
    log_prob: float                # sum of the token log-probabilities, <eos> included
    num_tokens: int                # tokens scored: len(target_tokens) + 1 for <eos>
    warnings: list[str] = field(default_factory=list)
    token_log_probs: list[float] = field(default_factory=list)  # one per scored token, <eos> last
    attention: "object" = field(default=None, repr=False)  # numpy (num_tokens, len(source_tokens)); None: CTranslate2

    @property
    def normalized(self) -> float:
        """log_prob per scored token."""
        return self.log_prob / self.num_tokens


def empty_result(source_tokens: list[str], warnings: list[str]) -> TranslationResult:
    import numpy as np

    attention = np.zeros((0, len(source_tokens)), dtype=np.float32)
    alternative = Alternative("", [], 0.0, attention, token_log_probs=[])
    return TranslationResult("", [], source_tokens, attention, 0.0, [alternative], warnings, token_log_probs=[])


def encode_texts(tokenizer: Tokenizer, vocab: Vocab, texts: Sequence[str], search_cfg: SearchConfig,
                 warnings: list[list[str]] | None = None) -> tuple[list[list[str]], list[list[int]]]:
    """Tokenize raw texts for decoding or scoring, cut to search.max_input_tokens (and, before
    tokenizing, to a character bound); returns (tokens, ids) per text.

    When `warnings` is given (one list per text), each cut is also appended there.
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
        for note in notes:
            log.warning("input %d: %s", i, note)
        if warnings is not None:
            warnings[i].extend(notes)
        all_tokens.append(tokens)
        all_ids.append(vocab.encode(tokens))
    return all_tokens, all_ids


def encode_sources(pipeline: TextPipeline, sentences: Sequence[str], search_cfg: SearchConfig,
                   warnings: list[list[str]] | None = None) -> tuple[list[list[str]], list[list[int]]]:
    """`encode_texts` with the pipeline's source tokenizer and vocabulary; with the pipeline's
    `source_eos` (Marian), a non-empty source ends with the eos token, shown among its tokens."""
    tokens, ids = encode_texts(pipeline.src_tokenizer, pipeline.src_vocab, sentences, search_cfg, warnings)
    if pipeline.source_eos:
        vocab = pipeline.src_vocab
        tokens = [t + [vocab.EOS] if t else t for t in tokens]
        ids = [i + [vocab.eos_id] if i else i for i in ids]
    return tokens, ids


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


def read_glossary(path) -> list[tuple[str, str]]:
    """A glossary file: one 'source phrase<TAB>target phrase' per line (UTF-8); empty lines are skipped.

    Raises:
        DataError: naming file:line, for a line without exactly one tab or with an empty side, or a
            file that cannot be read.
    """
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read the glossary: {err}") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        sides = line.split("\t")
        if len(sides) != 2 or not sides[0].strip() or not sides[1].strip():
            raise DataError(f"{path}:{number}: expected 'source phrase<TAB>target phrase', got {line[:80]!r}")
        pairs.append((sides[0].strip(), sides[1].strip()))
    return pairs


def check_decoding_args(*, beam_size: int, n_best: int, sampling_topk: int, sampling_temperature: float,
                        length_penalty: float | None = None, seed: int | None = None) -> None:
    """The argument rules both engines share; the bounds (bounds.py) keep every call finite in
    time, memory and arithmetic.

    Raises:
        ValueError: naming the argument.
    """
    BEAM.check("beam_size", beam_size)
    BEAM.check("n_best", n_best)
    if n_best > beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    SAMPLING_TOPK.check("sampling_topk", sampling_topk)
    if sampling_topk != 1 and beam_size != 1:
        raise ValueError(f"sampling (sampling_topk={sampling_topk}) draws one translation: it needs beam_size=1, "
                         f"got {beam_size}")
    SAMPLING_TEMPERATURE.check("sampling_temperature", sampling_temperature)
    if length_penalty is not None:
        LENGTH_PENALTY.check("length_penalty", length_penalty)
    if seed is not None:
        DECODING_SEED.check("seed", seed)


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


# ----------------------------------------------------------------------------- what attention gives back
# Both work on a result's tokens and its attention (len(tokens), len(source_tokens)), whatever the
# engine, so the native and CTranslate2 engines (and every model) give them alike.

SPM_WORD_START = "\u2581"  # sentencepiece's mark of a piece that starts a word


def token_words(tokens: Sequence[str], subword: bool) -> list[int]:
    """The word index of each token: with `subword` (sentencepiece), a piece joins the word of the
    piece before it unless it starts with the word mark; otherwise every token is a word."""
    words, word = [], -1
    for i, token in enumerate(tokens):
        if not subword or i == 0 or token.startswith(SPM_WORD_START):
            word += 1
        words.append(word)
    return words


def word_alignment(attention, source_tokens: Sequence[str], tokens: Sequence[str], *,
                   subword: bool) -> list[tuple[int, int]]:
    """Word alignment from attention: each output word is linked to the source word it attends to
    most (the argmax rule of Luong et al. 2015 sec. 3 and fairseq's --print-alignment), with the
    attention of a word's pieces summed on both sides.

    Args:
        attention: (len(tokens), len(source_tokens)) array.
        subword: the tokens are sentencepiece pieces (merged into words); else tokens are words.

    Returns:
        (source word, output word) pairs, one per output word, in output order; Pharaoh's "i-j".
    """
    import numpy as np

    if not tokens or not source_tokens:
        return []
    src_words = np.asarray(token_words(source_tokens, subword))  # (src_len,)
    tgt_words = np.asarray(token_words(tokens, subword))  # (tgt_len,)
    weights = np.asarray(attention, dtype=np.float64).reshape(len(tokens), len(source_tokens))
    merged = np.zeros((tgt_words[-1] + 1, src_words[-1] + 1))  # (tgt_words, src_words)
    np.add.at(merged, (tgt_words[:, None], src_words[None, :]), weights)
    return [(int(src), tgt) for tgt, src in enumerate(merged.argmax(axis=1))]


def pharaoh(links: Sequence[tuple[int, int]]) -> str:
    """Links as Pharaoh text: "0-0 1-2 ..." (source-output)."""
    return " ".join(f"{src}-{tgt}" for src, tgt in links)


def replace_unknowns(tokens: Sequence[str], source_tokens: Sequence[str], attention, *, subword: bool,
                     start: int = 0) -> tuple[list[str], list[int]]:
    """Replace each <unk> output token (at position >= `start`) by the source word that its row of
    attention weighs most (Luong et al. 2015, "Addressing the rare word problem", the copy rule
    of OpenNMT-py's replace_unk); with `subword`, the whole word around the attended piece.

    Args:
        attention: (len(tokens), len(source_tokens)) array.

    Returns:
        (the new tokens, the positions replaced).
    """
    import numpy as np

    tokens = list(tokens)
    unknown = [i for i in range(start, len(tokens)) if tokens[i] == Vocab.UNK]
    if not unknown or not source_tokens:
        return tokens, []
    weights = np.asarray(attention).reshape(len(tokens), len(source_tokens))
    src_words = token_words(source_tokens, subword)
    for i in unknown:
        word = src_words[int(weights[i].argmax())]
        pieces = [t for t, w in zip(source_tokens, src_words) if w == word]
        tokens[i] = "".join(pieces)
    return tokens, unknown


class Engine(Protocol):
    """What `Translator` asks of an engine: translate and score raw text (both in input order).

    Both engines take the same arguments with the same meaning (decode_sources' docstring):
    beam_size (1 = greedy), length_penalty (GNMT alpha; None = the run's search config),
    batch_size (sentences per batch), n_best, sampling_topk / sampling_temperature / seed,
    target_prefix (one text or None per sentence: the translation starts with it).
    The native engine also takes `constraints` (per sentence, target phrases that must appear
    exactly once: applicable_constraints' output); `Translator` refuses them for other engines.
    """

    name: str
    pipeline: TextPipeline
    search_cfg: SearchConfig

    def translate(self, sentences: Sequence[str], *, beam_size: int, length_penalty: float | None = None,
                  batch_size: int = 64, n_best: int = 1, layer: int | None = None, head: int | None = None,
                  sampling_topk: int = 1, sampling_temperature: float = 1.0, seed: int | None = None,
                  target_prefix: Sequence[str | None] | None = None) -> list[TranslationResult]: ...

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64) -> list[ScoreResult]: ...
