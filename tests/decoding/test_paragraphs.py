"""A paragraph's sentences joined into one result (decoding/paragraphs.py) and coverage
(decoding/coverage.py), against values computed here by hand or by loops."""

import numpy as np
import pytest

from attnmt.decoding import coverage as cov
from attnmt.decoding.coverage import measure_coverage
from attnmt.decoding.paragraphs import join_sentences
from attnmt.decoding.results import Alternative, TranslationResult

SPM = "\u2581"


def sentence(text, tokens, source_tokens, attention, *, source_chars, score=-1.0, alignment=None, replaced=(),
             logps=None, alternatives=None):
    attention = np.asarray(attention, dtype=np.float32)
    result = TranslationResult(text, tokens, source_tokens, attention, score, [], [], list(replaced), alignment,
                               logps)
    result.alternatives = alternatives or [Alternative(text, tokens, score, attention, list(replaced), alignment, logps)]
    result.sentences = [measure_coverage(attention, source_tokens, tokens, subword=True, source=(0, source_chars),
                                         target=(0, len(text)))]
    return result


def two_sentences():
    # sentence 1: source "▁Ein ▁Hund ▁läuft ." (3 words + "."), output "▁A ▁dog ▁ru ns ." (3 words + ".")
    first = sentence("A dog runs.", [f"{SPM}A", f"{SPM}dog", f"{SPM}ru", "ns", "."],
                     [f"{SPM}Ein", f"{SPM}Hund", f"{SPM}läuft", "."],
                     [[.9, .1, 0, 0], [0, .8, .2, 0], [0, 0, 1, 0], [0, 0, .7, .3], [0, 0, 0, 1]],
                     source_chars=15, score=-0.5, alignment=[(0, 0), (1, 1), (2, 2)], replaced=[1], logps=[-.1, -.2, -.3, -.4, -.5, -.6])
    # sentence 2: source "▁Ka tze ▁." (2 words), output "▁Cat ▁." ; the source word "Ka tze" gets 0.02
    second = sentence("Cat.", [f"{SPM}Cat", f"{SPM}."], [f"{SPM}Ka", "tze", f"{SPM}."],
                      [[0.01, 0.01, .98], [0, 0, 1]], source_chars=6, score=-2.0, alignment=[(0, 0)], logps=[-1.0, -2.0, -3.0])
    return first, second


def test_join_keeps_the_source_spacing_and_shifts_every_index():
    text = "  Ein Hund läuft.\n\nKatze.\t"
    spans = [(2, 17), (19, 25)]
    first, second = two_sentences()
    paragraph = join_sentences(text, spans, [first, second], subword=True)
    assert paragraph.text == "  A dog runs.\n\nCat.\t"
    assert paragraph.tokens == first.tokens + second.tokens
    assert paragraph.source_tokens == first.source_tokens + second.source_tokens
    expected = np.zeros((7, 7), dtype=np.float32)  # (tgt_len, src_len): the two blocks on the diagonal
    expected[:5, :4] = first.attention
    expected[5:, 4:] = second.attention
    np.testing.assert_array_equal(paragraph.attention, expected)
    # words (a piece without ▁ joins the word before): source "Ein Hund läuft." = 0..2, "Katze ." = 3, 4;
    # output "A dog runs." = 0..2, "Cat ." = 3, 4
    assert paragraph.alignment == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert paragraph.replaced == [1]
    assert paragraph.token_log_probs == [-.1, -.2, -.3, -.4, -.5, -.6, -1.0, -2.0, -3.0]
    assert paragraph.score == pytest.approx((6 * -0.5 + 3 * -2.0) / 9)
    assert [s.source for s in paragraph.sentences] == spans
    assert [paragraph.text[a:b] for a, b in (s.target for s in paragraph.sentences)] == ["A dog runs.", "Cat."]
    assert paragraph.sentences[0].uncovered == []
    assert paragraph.sentences[1].uncovered == [3]  # "Katze" (the paragraph's word 3) got 0.02
    assert paragraph.flagged and paragraph.uncovered == [3]
    assert paragraph.coverage == pytest.approx(min(s.coverage for s in paragraph.sentences))
    assert [a.text for a in paragraph.alternatives] == ["  A dog runs.\n\nCat.\t"]


def test_one_sentence_keeps_its_result_and_the_whitespace_around_it():
    first, _ = two_sentences()
    tokens, attention = list(first.tokens), first.attention.copy()
    text = "\t Ein Hund läuft.\n"
    paragraph = join_sentences(text, [(2, 17)], [first], subword=True)
    assert paragraph.text == "\t A dog runs.\n" and paragraph.alternatives[0].text == "\t A dog runs.\n"
    assert paragraph.tokens == tokens and np.array_equal(paragraph.attention, attention)
    assert paragraph.sentences[0].source == (2, 17) and paragraph.sentences[0].target == (2, 13)


def test_a_blank_paragraph_gives_an_empty_translation():
    paragraph = join_sentences(" \n ", [], [], subword=False)
    assert paragraph.text == "" and paragraph.tokens == [] and paragraph.attention.shape == (0, 0)
    assert not paragraph.flagged


def loop_received(attention, source_tokens, subword):
    """The attention each source word received, by loops (a word starts at a ▁ piece, or every token)."""
    words = []
    for i, token in enumerate(source_tokens):
        if not subword or i == 0 or token.startswith(SPM):
            words.append([i])
        else:
            words[-1].append(i)
    return [sum(float(attention[r][c]) for r in range(len(attention)) for c in word) for word in words]


@pytest.mark.parametrize("subword", [False, True])
def test_coverage_against_loops(subword):
    rng = np.random.default_rng(3)
    source = [f"{SPM}Ein", "e", f"{SPM}Frau", ",", f"{SPM}zwei", f"{SPM}Hunde", "."]
    attention = rng.dirichlet(np.full(len(source), 0.3), size=4)  # (tgt_len, src_len), rows sum to 1
    attention[:, 4] = 0.0  # "zwei" never attended
    attention /= attention.sum(axis=1, keepdims=True)
    tokens = ["A", "woman", "dogs", "."]
    got = measure_coverage(attention, source, tokens, subword=subword, source=(0, 9), target=(0, 5))
    received = loop_received(attention, source, subword)
    texts = ["".join(source[i] for i in w) for w in _groups(source, subword)]
    words = [j for j, t in enumerate(texts) if any(ch.isalnum() for ch in t)]
    assert got.coverage == pytest.approx(sum(min(1.0, r) for r in received) / len(received))
    assert got.uncovered == [j for j in words if received[j] < cov.WORD_ATTENTION_MIN]
    assert (4 if not subword else 2) in got.uncovered  # "zwei"
    assert got.least == pytest.approx(min(received[j] for j in words))
    assert got.length_ratio == pytest.approx(4 / 7)
    assert got.flagged


def _groups(source, subword):
    groups = []
    for i, token in enumerate(source):
        if not subword or i == 0 or token.startswith(SPM):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def test_a_short_output_is_flagged_even_with_attention_everywhere():
    source = ["a", "b", "c", "d", "e", "f"]
    attention = np.full((2, 6), 1 / 6)  # every word gets 1/3: covered, but 2 tokens for 6
    got = measure_coverage(attention, source, ["x", "y"], subword=False, source=(0, 11), target=(0, 3))
    assert got.uncovered == [] and got.length_ratio == pytest.approx(1 / 3) and got.flagged
    fine = measure_coverage(np.eye(6), source, list("uvwxyz"), subword=False, source=(0, 11), target=(0, 11))
    assert fine.coverage == pytest.approx(1.0) and not fine.flagged


def test_an_empty_output_covers_nothing_and_is_flagged():
    """A model that writes nothing at once (eos first) for a non-empty source: no attention row,
    so every word is uncovered and the sentence is flagged (before: a reshape error)."""
    import numpy as np

    from attnmt.decoding.coverage import measure_parts

    found = measure_parts(np.zeros((0, 3), dtype=np.float32), ["ein", "hund", "."], [], subword=False,
                          parts=[((0, 10), 0, 3)], target=(0, 0))
    assert len(found) == 1 and found[0].flagged and found[0].coverage == 0.0


# ---- a paragraph's attention kept per sentence (issue 66 group A) ---------------------------

def many_sentences(n, rng):
    """n one-sentence results of 3-6 output tokens over 2-5 source tokens, random attention."""
    results = []
    for i in range(n):
        rows, cols = int(rng.integers(3, 7)), int(rng.integers(2, 6))
        attention = rng.dirichlet(np.ones(cols), size=rows).astype(np.float32)
        results.append(sentence(f"S{i}.", [f"{SPM}t{i}"] * (rows - 1) + ["."], [f"{SPM}s{i}"] * (cols - 1) + ["."],
                                attention, source_chars=4))
    return results


def paragraph_of(results):
    text = " ".join(f"Q{i:04d}." for i in range(len(results)))
    spans = [(7 * i, 7 * i + 6) for i in range(len(results))]
    return join_sentences(text, spans, results, subword=True)


def test_a_paragraphs_attention_is_its_blocks_and_reads_as_the_dense_matrix():
    from attnmt.decoding.results import BlockAttention

    results = many_sentences(12, np.random.default_rng(5))
    paragraph = paragraph_of(results)
    attention = paragraph.attention
    assert isinstance(attention, BlockAttention)
    rows, cols = sum(len(r.tokens) for r in results), sum(len(r.source_tokens) for r in results)
    assert attention.shape == (rows, cols)
    expected = np.zeros((rows, cols), dtype=np.float32)  # built by loops: each block on the diagonal
    r = c = 0
    for result in results:
        for i in range(len(result.tokens)):
            for j in range(len(result.source_tokens)):
                expected[r + i, c + j] = result.attention[i][j]
        r, c = r + len(result.tokens), c + len(result.source_tokens)
    np.testing.assert_array_equal(np.asarray(attention), expected)
    for row in (0, 7, rows - 1):
        np.testing.assert_array_equal(attention.row(row), expected[row])
    assert attention.cells == sum(len(r.tokens) * len(r.source_tokens) for r in results)  # linear, not rows * cols
    np.testing.assert_array_equal(np.asarray(paragraph.alternatives[0].attention), expected)
    nested = BlockAttention.join([attention, results[0].attention], [rows, len(results[0].tokens)],
                                 [cols, len(results[0].source_tokens)])  # a paragraph inside a paragraph: flattened
    assert len(nested.blocks) == len(results) + 1 and nested.shape == (rows + len(results[0].tokens),
                                                                       cols + len(results[0].source_tokens))


def test_joining_a_paragraph_takes_memory_linear_in_its_sentences():
    """tracemalloc's peak while joining N sentences: 4x the sentences may take about 4x the memory,
    never the 16x of one dense (tokens x tokens) matrix (2,000 sentences of ~5 tokens: 9 MB of
    blocks against 200 MB dense)."""
    import tracemalloc

    rng = np.random.default_rng(7)
    peaks = {}
    for n in (500, 2000):
        results = many_sentences(n, rng)
        tracemalloc.start()
        paragraph_of(results)
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[2000] < 6 * peaks[500], peaks
