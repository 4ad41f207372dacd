"""documents/markup.py: HTML split into sentences per block and put back with its inline tags
placed by word alignment. Translations come from fake translators written here (upper-casing, reversing,
dropping words) whose alignments are known, so every expected output is worked out by hand;
structure is checked by re-parsing the output and comparing tags, attributes and nesting."""

from __future__ import annotations

import random
from html.parser import HTMLParser

import pytest
from bs4 import BeautifulSoup
from hypothesis import given, strategies as st

from attnmt.decoding.results import TranslationResult
from support.fuzzing import fuzz
from support.html_structure import structure

from attnmt.documents.markup import (MAX_DEPTH, AlignedTranslation, MarkupDocument, aligned_translation,
                                     aligned_translations, locate, translate_html)


def upper(sentences):
    """Word for word, upper-cased, in order: word i -> word i."""
    out = []
    for sentence in sentences:
        words = sentence.split()
        out.append(AlignedTranslation(sentence.upper(), words, [w.upper() for w in words],
                                      [(i, i) for i in range(len(words))]))
    return out


def reverse(sentences):
    """Word for word in reverse order: word i -> word n-1-i."""
    out = []
    for sentence in sentences:
        words = sentence.split()
        n = len(words)
        out.append(AlignedTranslation(" ".join(reversed(words)), words, words[::-1],
                                      [(n - 1 - j, j) for j in range(n)]))
    return out


def test_nested_and_adjacent_inline_tags_in_order():
    html = '<p>ein <b>roter <i>Ball</i></b> <a href="/x?a=1&amp;b=2" title="Titel">und</a><span> ein</span> Hund</p>'
    assert translate_html(html, upper) == ('<p>EIN <b>ROTER <i>BALL</i></b> <a href="/x?a=1&amp;b=2" title="Titel">UND'
                                           '</a> <span>EIN</span> HUND</p>')


def test_reordered_words_carry_their_tags():
    html = '<p>ein <b>roter <i>Ball</i></b> und <a href="#h">Hund</a></p>'
    # output words: Hund und Ball roter ein; <b> wraps the outputs of "roter Ball" (2..3), <i> that of Ball (2)
    assert translate_html(html, reverse) == '<p><a href="#h">Hund</a> und <b><i>Ball</i> roter</b> ein</p>'


def test_blocks_are_sentences_of_their_own():
    html = ("<div>vor <b>dem</b><p>erster Satz</p>nach <ul><li>eins</li><li>zwei <em>drei</em></li></ul></div>"
            "<h1>Titel</h1>")
    assert MarkupDocument(html).sentences == ["vor dem", "erster Satz", "nach", "eins", "zwei drei", "Titel"]
    assert translate_html(html, upper) == ("<div>VOR <b>DEM</b><p>ERSTER SATZ</p>NACH <ul><li>EINS</li><li>ZWEI "
                                           "<em>DREI</em></li></ul></div><h1>TITEL</h1>")


def test_an_inline_element_holding_a_block_is_a_block():
    html = "<a href='/'>Seite <div>innen</div></a>"
    assert MarkupDocument(html).sentences == ["Seite", "innen"]
    assert structure(translate_html(html, upper)) == structure(html)


def test_entities_are_text_for_the_model_and_escaped_again():
    html = "<p>Fisch &amp; Chips &lt;b&gt; caf&eacute;&nbsp;<b>gut&#33;</b></p>"
    # "<b>" as text is a tag in a string: kept (protected.py), not read by the model
    assert MarkupDocument(html).sentences == ["Fisch & Chips café gut!"]
    out = translate_html(html, upper)
    assert out == "<p>FISCH &amp; CHIPS &lt;b&gt; CAFÉ <b>GUT!</b></p>"
    assert structure(out) == structure(html)


def test_text_without_letters_stays_as_it_is():
    """Issue 66 F: "<p>2024</p>" was sent to the model and came back as an invented sentence."""
    html = "<p>2024</p><p>12.03.2024</p><p>***</p><p>—</p><p><a href='x'>yahoo.com</a></p><p>Hund</p>"
    assert MarkupDocument(html).sentences == ["Hund"]
    assert translate_html(html, upper) == html.replace("'x'", '"x"').replace("Hund", "HUND")


def test_a_doctype_with_declarations_is_refused():
    """Issue 66 F/G: an internal subset's "]>" was read as text and translated."""
    with pytest.raises(ValueError, match=r"DOCTYPE declares an internal subset"):
        MarkupDocument('<!DOCTYPE html [<!ENTITY e "x">]><p>Hund &e;</p>')
    assert MarkupDocument("<!DOCTYPE html><p>Hund</p>").sentences == ["Hund"]


def test_urls_domains_and_placeholders_keep_their_place_and_form():
    html = "<p>siehe yahoo.com und %s oder {name} bei a.b@example.org</p>"
    assert MarkupDocument(html).sentences == ["siehe und oder bei"]
    assert translate_html(html, upper) == "<p>SIEHE yahoo.com UND %s ODER {name} BEI a.b@example.org</p>"


def test_void_elements_stay_and_break_words():
    html = '<p>Hund<br>Katze <img src="a.png" alt="ein Bild"> Haus<br/></p>'
    assert MarkupDocument(html).sentences == ["Hund Katze Haus"]
    out = translate_html(html, upper)
    assert out == '<p>HUND<br/> KATZE <img alt="ein Bild" src="a.png"/> HAUS<br/></p>'
    assert structure(out) == structure(html)  # alt is not translated


def test_script_style_code_and_translate_no_pass_through():
    html = ('<html><head><style>p > b { color: red }</style><script>if (a < b) { x = "<b>&amp;" }</script></head>'
            '<body><p>lauf <code>rm -rf &lt;dir&gt;</code> jetzt <span translate="no">Marke</span></p>'
            '<pre>  zwei   Leer</pre></body></html>')
    out = translate_html(html, upper)
    soup, source = BeautifulSoup(out, "html.parser"), BeautifulSoup(html, "html.parser")
    for name in ("style", "script", "code", "pre", "span"):
        assert str(soup.find(name)) == str(source.find(name))
    assert soup.find("p").get_text() == "LAUF rm -rf <dir> JETZT Marke"


def test_comments_doctype_and_whitespace_between_blocks_are_kept():
    html = "<!DOCTYPE html>\n<html>\n  <body>\n    <!-- Notiz -->\n    <p>hallo</p>\n  </body>\n</html>\n"
    # Beautiful Soup writes whitespace-only text between tags as one newline (or space)
    expected = "<!DOCTYPE html>\n\n<html>\n<body>\n<!-- Notiz -->\n<p>HALLO</p>\n</body>\n</html>\n"
    assert translate_html(html, upper) == expected


def test_a_tag_whose_words_the_model_dropped_goes_on_the_nearest_word():
    """Issue 65 A: a formatted run whose words got no alignment was emptied."""
    def drop_middle(sentences):
        words = sentences[0].split()  # "ein roter Ball" -> "A ball": roter has no output word
        return [AlignedTranslation("A ball", words, ["A", "ball"], [(0, 0), (2, 1)])]

    # roter starts after 1 of 3 source words: boundary round(1 * 2 / 3) = 1, the word "ball"
    assert translate_html("<p>ein <b>roter</b> Ball</p>", drop_middle) == "<p>A <b>ball</b></p>"


def test_three_links_keep_a_word_each():
    """Issue 65 A: of three links only the one whose word was aligned kept any text."""
    def first_only(sentences):  # 7 source words -> 7 output words, only "Drei" and "eins" aligned
        words = sentences[0].split()
        out = ["Three", "links:", "one", ",", "two", "and", "three"]
        return [AlignedTranslation(" ".join(out), words, out, [(0, 0), (2, 2)])]

    html = '<p>Drei Links: <a href="1">eins</a> , <a href="2">zwei</a> und <a href="3">drei</a></p>'
    # link 1 on its aligned word "one"; link 2 starts after 4 of 7 source words: boundary 4, "two";
    # link 3 after 6: boundary 6, "three"
    assert translate_html(html, first_only) == ('<p>Three links: <a href="1">one</a> , <a href="2">two</a> and '
                                                '<a href="3">three</a></p>')


def test_a_sibling_with_two_words_gives_one_up():
    def both_to_first(sentences):  # "rotes Haus Tür" -> "red house": Tür has no output word
        words = sentences[0].split()
        return [AlignedTranslation("red house", words, ["red", "house"], [(0, 0), (1, 1)])]

    assert translate_html("<p><b>rotes Haus</b> <i>Tür</i></p>", both_to_first) == "<p><b>red</b> <i>house</i></p>"


def test_adjacent_tags_aligned_to_one_word_do_not_overlap():
    def merge(sentences):  # both source words -> the one output word
        words = sentences[0].split()
        return [AlignedTranslation("Haustür", words, ["Haustür"], [(0, 0), (1, 0)])]

    out = translate_html("<p><b>house</b> <i>door</i></p>", merge)
    assert out == "<p><b>Haustür</b><i></i></p>"  # one word for two: the second stays empty, nothing overlaps


def test_empty_translation_keeps_every_tag():
    def nothing(sentences):
        return [AlignedTranslation("", s.split(), [], []) for s in sentences]

    html = '<p>ein <b>roter <i>Ball</i></b><br> <a href="x">da</a></p>'
    assert structure(translate_html(html, nothing)) == structure(html)


def test_locate_matches_words_by_characters():
    assert locate(["ein", "hund", "."], "Ein  Hund.") == [(0, 3), (5, 9), (9, 10)]  # lowercased, split off
    assert locate(["fi", "sch"], "\ufb01sch") == [(0, 0), (1, 4)]  # a ligature no word matches: empty span
    assert locate(["a", "b"], "a b c d e") == [(0, 1), (2, 3)]  # a cut input: a prefix
    assert locate([], "a") == []


def test_locate_normalized_characters_fall_back_to_matching():
    spans = locate(["Cafe", "gut"], "Café gut")  # "é" normalized away by a tokenizer
    assert spans == [(0, 3), (5, 8)]


def test_aligned_translation_joins_sentencepiece_pieces():
    result = TranslationResult(text="Der Hund", tokens=["▁Der", "▁Hu", "nd"], source_tokens=["▁The", "▁d", "og"],
                               attention=None, alignment=[(0, 0), (1, 1)])
    aligned = aligned_translation(result, subword=True)
    assert (aligned.source_words, aligned.target_words) == (["The", "dog"], ["Der", "Hund"])
    assert aligned_translation(result, subword=False).source_words == ["▁The", "▁d", "og"]


def test_an_aligned_translation_carries_its_results_confidence_and_a_pivot_its_less_sure_legs():
    """What the documents' review marks read (review.py): one leg's confidence as it is; through a
    pivot, the lower of the two legs'; unknown when a leg's is."""
    def result(text: str, confidence: float | None) -> TranslationResult:
        words = text.split()
        return TranslationResult(text=text, tokens=words, source_tokens=words, attention=None,
                                 alignment=[(i, i) for i in range(len(words))], confidence=confidence)

    assert [a.confidence for a in aligned_translations([([result("A", 0.7), result("B", None)], False)])] == [0.7, None]
    legs = [([result("A B", 0.7), result("C", 0.2), result("D", None)], False),
            ([result("P Q", 0.4), result("R", 0.9), result("S", 0.9)], False)]
    assert [a.confidence for a in aligned_translations(legs)] == [0.4, 0.2, None]


def test_aligned_translations_of_one_leg_and_through_a_pivot():
    """One leg: each result's words and links as they are. Two legs (x y -> A B C -> P Q): the last
    leg's text and words, each output word linked to the source word its pivot word was linked to
    (P <- C <- x; Q <- A <- y; B, linked to y, has no output word). Worked out by hand."""
    first = TranslationResult(text="A Bc C", tokens=["▁A", "▁B", "c", "▁C"], source_tokens=["▁x", "▁y"],
                              attention=None, alignment=[(1, 0), (1, 1), (0, 2)])
    second = TranslationResult(text="P Q", tokens=["P", "Q"], source_tokens=["A", "Bc", "C"], attention=None,
                               alignment=[(2, 0), (0, 1)])
    one, = aligned_translations([([first], True)])
    assert one == AlignedTranslation("A Bc C", ["x", "y"], ["A", "Bc", "C"], [(1, 0), (1, 1), (0, 2)])
    both, = aligned_translations([([first], True), ([second], False)])
    assert both == AlignedTranslation("P Q", ["x", "y"], ["P", "Q"], [(0, 0), (1, 1)])
    with pytest.raises(ValueError, match=r"a pivot leg of 2 results for 1 texts"):
        aligned_translations([([first], True), ([second, second], False)])
    with pytest.raises(ValueError, match=r"at least one leg"):
        aligned_translations([])


def test_too_deep_nesting_is_refused():
    with pytest.raises(ValueError, match=f"at most {MAX_DEPTH}"):
        MarkupDocument("<b>" * (MAX_DEPTH + 5) + "x")


def test_render_checks_its_translations():
    document = MarkupDocument("<p>a</p><p>b</p>")
    with pytest.raises(ValueError, match="1 translations for 2 sentences"):
        document.render(upper(["a"]))


# ---- property: generated fragments from a small tag alphabet ----------------------------------

WORDS = st.sampled_from(["hund", "Katze", "&amp;", "&lt;x&gt;", "caf&eacute;", "rot.", "&nbsp;", " ", "  "])
LEAF = st.one_of(WORDS, st.just("<br>"), st.just('<img src="a.png" alt="Bild &quot;1&quot;">'),
                 st.just("<code>a &lt; b</code>"), st.just("<!-- c -->"))


def _wrap(children):
    inline = st.sampled_from(["<b>{}</b>", "<i>{}</i>", '<span class="x  y">{}</span>', '<a href="/p?q=1&amp;r=2">{}</a>'])
    block = st.sampled_from(["<p>{}</p>", '<div id="d">{}</div>', "<li>{}</li>"])
    return st.tuples(st.one_of(inline, block), st.lists(children, max_size=4)).map(lambda t: t[0].format("".join(t[1])))


FRAGMENTS = st.lists(st.recursive(LEAF, _wrap, max_leaves=20), min_size=1, max_size=5).map("".join)


def shuffled(seed: int, drop: float):
    """A translator that permutes each sentence's words (upper-cased) and drops some, by `seed`."""
    def translate(sentences):
        rng, out = random.Random(seed), []
        for sentence in sentences:
            words = sentence.split()
            order = [i for i in rng.sample(range(len(words)), len(words)) if rng.random() >= drop]
            out.append(AlignedTranslation(" ".join(words[i].upper() for i in order), words,
                                          [words[i].upper() for i in order], [(i, j) for j, i in enumerate(order)]))
        return out
    return translate


class _Words(HTMLParser):
    """The words of an HTML fragment by the standard library's parser (not the one under test):
    text outside <code>, comments and attributes, entities decoded."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.depth, self.words = 0, []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.depth += tag == "code"

    def handle_endtag(self, tag):
        self.depth -= tag == "code" and self.depth > 0

    def handle_data(self, data):
        if not self.depth:
            self.words.extend(data.split())


@fuzz(150, 3000)
@given(FRAGMENTS, st.integers(0, 2**16), st.sampled_from([0.0, 0.3]))
def test_generated_fragments_keep_tags_attributes_and_nesting(html, seed, drop):
    out = translate_html(html, shuffled(seed, drop))
    assert structure(out) == structure(html)
    reparsed, source = BeautifulSoup(out, "html.parser"), BeautifulSoup(html, "html.parser")
    assert [str(c) for c in reparsed.find_all("code")] == [str(c) for c in source.find_all("code")]
    if drop == 0.0:  # every word comes out, once, upper-cased; the tag "<x>" (text) is kept, not read
        def words(text: str) -> list[str]:
            return sorted(" ".join(_Words(text).words).replace("<x>", "").split())

        assert words(out) == sorted(w.upper() for w in words(html)) and out.count("&lt;x&gt;") == html.count("&lt;x&gt;")


@fuzz(150, 3000)
@given(st.lists(st.sampled_from(["<", ">", "</", "/>", "<!", "<?", "<![CDATA[", "]]>", "-->", "<!--", "&", "&#", ";",
                                 "=", '"', "'", "p", "b", "a href", "br", "script", "x", " ", "\n", "\x00"])
                | st.characters(exclude_categories=("Cs",)), max_size=40).map("".join))
def test_any_text_gives_html_that_parses_back_the_same(text):
    out = translate_html(text, upper)
    assert structure(out) == structure(text)
