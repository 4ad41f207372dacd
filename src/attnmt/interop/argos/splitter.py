"""A sentence splitter that argostranslate runs offline: attnmt's splitting rules compiled into
a two-layer convolution over characters, in the ONNX format of MiniSBD (the splitter of
argostranslate >= 1.10 and of LibreTranslate), so that a package carries it as
``minisbd/<lang>.onnx`` and nothing is downloaded.

    net = compile_rules("de")                  # the rules as weights (a SplitterNet)
    data = splitter_onnx(net)                  # minisbd/de.onnx's bytes

Shapes:
    batch: paragraphs; chars: characters of a paragraph; channels: per-character indicators
    (vocabulary classes, identities and MiniSBD's three features); patterns: the rules.

MiniSBD feeds the model `units` (batch, chars) int64, the ids of the characters in the
vocabulary that the model's metadata holds, and `features` (batch, chars, 3) float32 (for each
character: is a space, is upper-case, is a digit), and reads `logits` (batch, chars, 5): class 2
ends a sentence at that character, 0 is none. The network:

    embedded = table[units] ++ features               # (batch, chars, channels) 0/1 indicators
    hits = relu(conv1d(embedded, pattern_weights))    # (batch, patterns, chars): 1 where a rule matches
    logits = hits^T @ votes + bias                    # (batch, chars, 5)

Each pattern is a conjunction over a window of characters (a stop, then a space, then a capital
or an opening quote; a dot after a lone capital; after one of the language's abbreviations from
the Moses non-breaking prefixes; after an ordinal in the languages that write one with a dot,
unless an article follows: the rules of data/sentences.py) with weight 1 on what it requires,
-|required| on what it forbids and bias 1 - |required|, so it is exactly 1 or <= 0. A boundary
is a match of a stop pattern not cancelled by a blocking pattern (votes +1 / -1, class 2's logit
2 x sum - 1). Where it differs from attnmt's own splitter (sentencex has more abbreviations and
rules): docs/interop.md, "Sentence splitting".
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from attnmt.data.sentences import ORDINAL_DOT
from attnmt.direction import base_language
from attnmt.interop.argos.onnx_proto import FLOAT, INT64, Graph, Input, Node, model_bytes

FEAT_FUNCS = ("space_before", "capitalized", "numeric")  # MiniSBD's per-character features, in its order
FEATURES = ("F_SPACE", "UPPER", "DIGIT")  # their channels
CLASSES = ("REAL", "SPACE", "STOP", "DOT", "CLOSER", "OPENER", "LETTER")  # from the vocabulary
STOPS = ".!?\u2026"
CLOSERS = "\"'\u201d\u2019\u201c\u00bb\u00ab)]}"
OPENERS = "\"'\u201e\u201c\u201a\u2018\u00ab\u00bb([{\u2013\u2014-"  # data/sentences.py's _OPENING
LETTERLIKE = ("LETTER", "DIGIT")
STARTS = ("UPPER", "OPENER", "DIGIT")  # what may begin the next sentence
# words after which data/sentences.py forces a boundary: never blocked
FORCED = frozenset({"etc", "usw", "usf", "atd", "aj"})
# words that follow a sentence-ending number but never an ordinal (data/sentences.py's rule for de)
STARTERS = {"de": tuple("Der Die Das Den Dem Des Ein Eine Einer Eines Einem Einen Er Sie Es Wir Ich Ihr Man "
                        "Zwei Drei Vier Fünf Viele Alle Dann Hier Dort".split())}
MAX_ABBREVIATION = 10  # characters; longer non-breaking prefixes are left out (a wider window)
PAD, UNK = "<PAD>", "<UNK>"


@dataclass(frozen=True)
class Pattern:
    """A conjunction over characters at offsets from the one it marks: every `require` entry
    (offset, channels: any of them) holds and no `forbid` entry does. `vote`: +1 a boundary
    (or an exception to a blocker), -1 a blocker."""

    name: str
    require: tuple[tuple[int, tuple[str, ...]], ...]
    forbid: tuple[tuple[int, tuple[str, ...]], ...] = ()
    vote: int = 1


@dataclass(frozen=True)
class SplitterNet:
    """The compiled splitter: vocabulary, embedding table, pattern weights and votes."""

    lang: str
    units: tuple[str, ...]       # id -> character (PAD, UNK first)
    channels: tuple[str, ...]    # CLASSES, identity channels "=c", FEATURES
    table: np.ndarray            # (vocab, channels - features) float32
    weights: np.ndarray          # (patterns, channels, window) float32
    bias: np.ndarray             # (patterns,)
    votes: np.ndarray            # (patterns, 5)
    vote_bias: np.ndarray        # (5,)
    left: int                    # the window's characters before the marked one
    patterns: tuple[Pattern, ...]


def abbreviations(lang: str) -> list[str]:
    """The Moses non-breaking prefixes of `lang` (sacremoses' lists; English's for a language it
    lacks) that block a boundary: not numeric-only ("No" before a number), not numbers (the
    ordinal rule has them), not forced ends, not single capitals (the initials rule has them), at
    most MAX_ABBREVIATION characters."""
    from sacremoses.corpus import NonbreakingPrefixes

    found = []
    for word in NonbreakingPrefixes().words(lang):
        if ("#" in word or word.isdigit() or word in FORCED or len(word) > MAX_ABBREVIATION
                or (len(word) == 1 and word.isupper())):
            continue
        if word not in found:
            found.append(word)
    return found


def rules(lang: str) -> list[Pattern]:
    """The patterns of `lang` (a language code; a regional one takes its language's rules)."""
    lang = base_language(lang)
    found = [Pattern("stop", ((0, ("STOP",)), (1, ("SPACE",)), (2, STARTS))),
             Pattern("stop then closer", ((-1, ("STOP",)), (0, ("CLOSER",)), (1, ("SPACE",)), (2, STARTS))),
             Pattern("initial", ((0, ("DOT",)), (-1, ("UPPER",))),
                     ((-2, LETTERLIKE),) + (((-1, ("=I",)),) if lang == "en" else ()), vote=-1),
             Pattern("list marker first", ((0, ("DOT",)), (-1, LETTERLIKE)), ((-2, ("REAL",)),), vote=-1),
             Pattern("list marker", ((0, ("DOT",)), (-1, LETTERLIKE), (-2, ("SPACE",)), (-3, ("STOP",))), vote=-1)]
    for word in abbreviations(lang):
        require = tuple((i - len(word), (f"={c}",)) for i, c in enumerate(word)) + ((0, ("DOT",)),)
        found.append(Pattern(f"abbreviation {word}", require, ((-len(word) - 1, LETTERLIKE),), vote=-1))
    if lang in ORDINAL_DOT:
        for digits in (1, 2, 3):
            number = tuple((-i, ("DIGIT",)) for i in range(1, digits + 1)) + ((0, ("DOT",)),)
            before = ((-digits - 1, LETTERLIKE),)
            found.append(Pattern(f"ordinal of {digits}", number, before, vote=-1))
            for word in STARTERS.get(lang, ()):
                spelled = number + ((1, ("SPACE",)),) + tuple((2 + i, (f"={c}",)) for i, c in enumerate(word))
                end = 2 + len(word)
                found.append(Pattern(f"number then {word}", spelled + ((end, ("SPACE",)),), before, vote=1))
                found.append(Pattern(f"number then {word} at the end", spelled, before + ((end, ("REAL",)),), vote=1))
    return found


def vocabulary(patterns: list[Pattern]) -> tuple[str, ...]:
    """The characters the splitter knows (others are <UNK>, read as letters): ASCII, Latin-1,
    Latin Extended-A, the general punctuation block and every character a pattern names."""
    chars = [chr(c) for c in (*range(32, 127), *range(0xA0, 0x180), *range(0x2010, 0x2028), 0x2039, 0x203A)]
    for pattern in patterns:
        for _, channels in pattern.require + pattern.forbid:
            chars += [name[1:] for name in channels if name.startswith("=")]
    return (PAD, UNK, *dict.fromkeys(chars))


def compile_rules(lang: str) -> SplitterNet:
    """The splitter of `lang` as weights (see the module docstring)."""
    patterns = rules(lang)
    units = vocabulary(patterns)
    identities = sorted({name for p in patterns for _, chans in p.require + p.forbid for name in chans
                         if name.startswith("=")})
    channels = (*CLASSES, *identities, *FEATURES)
    index = {name: i for i, name in enumerate(channels)}
    table = np.zeros((len(units), len(channels) - len(FEATURES)), np.float32)
    table[units.index(UNK), [index["REAL"], index["LETTER"]]] = 1.0
    for i, char in enumerate(units[2:], start=2):
        marks = {"REAL": True, "SPACE": char == " ", "STOP": char in STOPS, "DOT": char == ".",
                 "CLOSER": char in CLOSERS, "OPENER": char in OPENERS, "LETTER": char.isalpha()}
        for name, on in marks.items():
            table[i, index[name]] = float(on)
        if f"={char}" in index:
            table[i, index[f"={char}"]] = 1.0
    offsets = [offset for p in patterns for offset, _ in p.require + p.forbid]
    left, right = max(0, -min(offsets)), max(0, max(offsets))
    weights = np.zeros((len(patterns), len(channels), left + right + 1), np.float32)
    bias = np.zeros(len(patterns), np.float32)
    votes = np.zeros((len(patterns), 5), np.float32)
    for j, pattern in enumerate(patterns):
        for offset, names in pattern.require:
            weights[j, [index[n] for n in names], offset + left] += 1.0
        for offset, names in pattern.forbid:
            weights[j, [index[n] for n in names], offset + left] -= float(len(pattern.require))
        bias[j] = 1.0 - len(pattern.require)
        votes[j, 2] = 2.0 * pattern.vote
    vote_bias = np.array([0.0, -10.0, -1.0, -10.0, -10.0], np.float32)
    return SplitterNet(base_language(lang), units, channels, table, weights, bias, votes, vote_bias, left,
                       tuple(patterns))


def splitter_onnx(net: SplitterNet) -> bytes:
    """`net` as a MiniSBD model: the ONNX graph of the module docstring, with MiniSBD's metadata
    (lang_code, config, vocab, lexicon)."""
    window = net.weights.shape[2]
    nodes = [
        Node("Gather", ["table", "units"], ["classes"], {"axis": 0}),           # (batch, chars, classes)
        Node("Concat", ["classes", "features"], ["embedded"], {"axis": 2}),    # (batch, chars, channels)
        Node("Transpose", ["embedded"], ["channels_first"], {"perm": [0, 2, 1]}),  # (batch, channels, chars)
        Node("Conv", ["channels_first", "pattern_weights", "pattern_bias"], ["matched"],
             {"kernel_shape": [window], "pads": [net.left, window - 1 - net.left]}),  # (batch, patterns, chars)
        Node("Relu", ["matched"], ["hits"]),
        Node("Transpose", ["hits"], ["hits_last"], {"perm": [0, 2, 1]}),      # (batch, chars, patterns)
        Node("MatMul", ["hits_last", "votes"], ["voted"]),                     # (batch, chars, 5)
        Node("Add", ["voted", "vote_bias"], ["logits"]),
    ]
    graph = Graph(f"attnmt_splitter_{net.lang}", nodes,
                  inputs=[Input("units", INT64, ["batch", "chars"]),
                          Input("features", FLOAT, ["batch", "chars", len(FEATURES)])],
                  outputs=[Input("logits", FLOAT, ["batch", "chars", 5])],
                  initializers={"table": net.table, "pattern_weights": net.weights, "pattern_bias": net.bias,
                                "votes": net.votes, "vote_bias": net.vote_bias})
    vocab = {"lang": net.lang, "idx": 0, "cutoff": 0, "lower": False,
             "_unit2id": {u: i for i, u in enumerate(net.units)}, "_id2unit": list(net.units)}
    config = {"skip_newline": False, "max_seqlen": 1000, "no_ssplit": False, "batch_size": 32,
              "feat_funcs": list(FEAT_FUNCS), "use_dictionary": False, "num_dict_feat": 0}
    metadata = {"lang_code": net.lang, "config": json.dumps(config), "vocab": json.dumps(vocab, ensure_ascii=False),
                "lexicon": "null", "producer": "attnmt (rules of data/sentences.py compiled; docs/interop.md)"}
    return model_bytes(graph, opset=13, metadata=metadata)
