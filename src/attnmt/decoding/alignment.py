"""What attention gives back: source-output word links (word_alignment) and <unk> output tokens
copied from the source (replace_unknowns).

Both work on a result's tokens and its attention (len(tokens), len(source_tokens)), whatever the
engine, so the native and CTranslate2 engines (and every model) give them alike.
"""

from __future__ import annotations

from typing import Sequence

from attnmt.data.vocab import Vocab

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


def token_texts(tokens: Sequence[str], subword: bool) -> list[str]:
    """The words the tokens make (token_words' grouping), each its pieces joined without the word
    mark: ["▁Ein", "▁Hund", "es"] -> ["Ein", "Hundes"]; words are their own text."""
    if not subword:
        return list(tokens)
    words: list[str] = []
    for i, token in enumerate(tokens):  # one pass: token_words' rule, without its indices
        piece = token.replace(SPM_WORD_START, "")
        if i == 0 or token.startswith(SPM_WORD_START):
            words.append(piece)
        else:
            words[-1] += piece
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
