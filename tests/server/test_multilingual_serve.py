"""`attnmt serve` of one multilingual model (de-en, en-de, fr-en) over real HTTP: every direction it
was trained for is listed and routed; fr -> de goes through English and says so; de -> fr, which
nothing reaches, gets 400 naming the directions; /v1 routes by source and target. The expected
translations come from the model loaded in this process."""

from __future__ import annotations

import httpx
import pytest
import torch

from attnmt.translator import Translator


@pytest.fixture(scope="module")
def server(served_multilingual):
    return served_multilingual


@pytest.fixture(scope="module")
def model(multilingual_pairs_run):
    return Translator.load(multilingual_pairs_run, device="cpu")


def post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=60)


def test_languages_list_every_direction_and_what_english_reaches(server):
    languages = {entry["code"]: entry["targets"] for entry in httpx.get(server.url + "/languages").json()}
    assert languages == {"de": ["en"], "en": ["de"], "fr": ["en", "de"]}  # fr -> de through en
    cards = httpx.get(server.url + "/v1/models").json()
    assert [(c["source_lang"], c["target_lang"]) for c in cards] == [("de", "en"), ("en", "de"), ("fr", "en")]
    assert all(c["directions"] == ["de-en", "en-de", "fr-en"] and c["name"] == "run" for c in cards)


@pytest.mark.parametrize("source, target, text", [("de", "en", "hund rot haus"), ("en", "de", "dog red house"),
                                                  ("fr", "en", "chien rouge maison")])
def test_each_direction_is_translated_by_its_language_token(server, model, source, target, text):
    answer = post(server, "/translate", {"q": text, "source": source, "target": target}).json()
    beam = model.cfg.search.beam_size
    expected = model.translate([text], source_lang=source, target_lang=target, beam_size=beam)[0].text
    assert libretranslate_fields(answer) == {"translatedText": expected}
    v1 = post(server, "/v1/translate", {"texts": [text], "source": source, "target": target}).json()
    assert v1["translations"][0]["text"] == answer["translatedText"]


def test_auto_and_detect_read_the_models_own_source_words(server, model):
    """`source: auto` and /detect tell the served sources apart by the model's lexicons (py3langid
    reads the toy's German "auto" as French, its "enfant" as 44% French), in any case, and the text
    goes to its own direction; a text no lexicon knows a word of goes to py3langid."""
    from attnmt.server.langid import LanguageDetector

    assert LanguageDetector(["de", "fr"]).detect("auto")[0]["language"] == "fr"  # py3langid alone
    for text, language in (("auto", "de"), ("AUTO ROT", "de"), ("enfant", "fr"), ("Voiture Rouge", "fr")):
        ranked = post(server, "/detect", {"q": text}).json()
        assert ranked[0]["language"] == language and ranked[0]["confidence"] > 50, (text, ranked)
        assert {d["language"] for d in ranked} == {"de", "en", "fr"} and abs(sum(d["confidence"] for d in ranked) - 100) < 0.5
        answer = post(server, "/translate", {"q": text, "source": "auto", "target": "en"}).json()
        expected = model.translate([text], source_lang=language, target_lang="en",
                                   beam_size=model.cfg.search.beam_size)[0].text
        assert answer["translatedText"] == expected and answer["detectedLanguage"]["language"] == language
    assert post(server, "/detect", {"q": "Deux chiens jouent dans la neige ."}).json()[0]["language"] == "fr"


def test_a_direction_through_english_says_so(server, model):
    text = "chien rouge maison"
    answer = post(server, "/translate", {"q": [text], "source": "fr", "target": "de"}).json()
    beam = model.cfg.search.beam_size
    english = model.translate([text], source_lang="fr", target_lang="en", beam_size=beam)[0].text
    german = model.translate([english], source_lang="en", target_lang="de", beam_size=beam)[0].text
    assert libretranslate_fields(answer) == {"translatedText": [german], "pivot": ["en"]}  # one pivot per text
    single = post(server, "/translate", {"q": text, "source": "fr", "target": "de"}).json()
    assert libretranslate_fields(single) == {"translatedText": german, "pivot": "en"}


@pytest.mark.parametrize("body, pattern", [
    ({"q": "hund", "source": "de", "target": "fr"}, r"^fr is not supported: this server translates de -> en, "
                                                    r"en -> de, fr -> en$"),  # LibreTranslate's words: fr as a target
    ({"q": "hund", "source": "cs", "target": "en"}, r"^cs is not supported: this server translates"),
])
def test_a_direction_nothing_reaches_gets_400_naming_the_directions(server, body, pattern):
    import re

    response = post(server, "/translate", body)
    assert response.status_code == 400 and re.search(pattern, response.json()["error"])


def test_v1_refuses_a_pivot_direction_and_says_where_it_works(server):
    response = post(server, "/v1/translate", {"texts": ["chien"], "source": "fr", "target": "de"})
    assert response.status_code == 400
    assert "not supported directly" in response.json()["error"] and "through en" in response.json()["error"]


# ---- generated languages and directions (Hypothesis), over real HTTP -----------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from support.fuzzing import fuzz  # noqa: E402
from support.servers import libretranslate_fields

CODES = st.one_of(st.sampled_from(["de", "en", "fr", "cs", "auto", "", "DE", "en-US", "<2fr>", "de-en"]),
                  st.text(max_size=12), st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))


@fuzz(60, 2000)
@given(source=CODES, target=CODES, route=st.sampled_from(["/translate", "/v1/translate", "/v1/score"]))
def test_any_source_and_target_get_an_answer_or_a_4xx_naming_the_problem(server, source, target, route):
    body = {"q": "hund rot", "source": source, "target": target} if route == "/translate" else \
        {"texts": ["hund rot"], "source": source, "target": target,
         **({"translations": ["dog red"]} if route == "/v1/score" else {})}
    response = post(server, route, body)
    assert response.status_code in (200, 400, 422), (response.status_code, response.text)
    if response.status_code != 200:
        assert isinstance(response.json()["error"], str) and response.json()["error"]
    else:
        direct = {("de", "en"), ("en", "de"), ("fr", "en")}
        if route == "/translate":  # fr -> de through en; auto: a source detected among those reaching target
            assert (source, target) in direct | {("fr", "de")} or (source == "auto" and target in ("en", "de"))
        else:  # /v1: a direction the model has, or none at all (the first one)
            assert (source, target) in direct | {(None, None)}


class EmitsSpecials(torch.nn.Module):
    """`model`, made to emit `forced` (token ids) at its first decoding steps, whatever it would write:
    a model that writes its language token, <unk>, pad or bos into its output."""

    def __init__(self, model, forced: list[int]):
        super().__init__()
        self.inner, self.forced, self.step = model, forced, 0

    def encode(self, *args):
        return self.inner.encode(*args)

    def init_state(self, enc):
        self.step = 0
        return self.inner.init_state(enc)

    def reorder_state(self, state, index, **kwargs):
        return self.inner.reorder_state(state, index, **kwargs)

    def decode_step(self, prev_ids, state):
        logits, state, attn = self.inner.decode_step(prev_ids, state)
        if self.step < len(self.forced):
            logits = torch.full_like(logits, -1e4)
            logits[:, self.forced[self.step]] = 0.0
        self.step += 1
        return logits, state, attn


def test_no_special_token_reaches_the_user_on_any_route(multilingual_pairs_run, thread_server):
    """Issue 50: a multilingual model's output text began with its language token ("<2en> ...").
    Here the model is made to write <2en>, <unk>, <2de>, "▁", pad and bos first: no route's text holds any of
    them (TextPipeline.target_text is the one place tokens become text), while /v1's tokens show them."""
    loaded = Translator.load(multilingual_pairs_run, device="cpu")
    vocab = loaded.pipeline.tgt_vocab
    # step 0 is the language token the search forces (placement "target"); then the model writes these
    forced = [vocab.stoi[t] for t in ("<2en>", "<2en>", vocab.UNK, "<2de>", "\u2581", vocab.PAD, vocab.BOS)]
    translator = Translator(EmitsSpecials(loaded.model, forced), loaded.pipeline, loaded.cfg)
    server = thread_server(translator)
    specials = ("<2", "<unk>", "<pad>", "<bos>", "<eos>", "</s>", "\u2581", "\u2047")
    text = "hund rot haus"
    answers = [post(server, "/translate", {"q": text, "source": "de", "target": "en"}).json()["translatedText"],
               post(server, "/translate", {"q": [text], "source": "de", "target": "en"}).json()["translatedText"][0],
               post(server, "/translate", {"q": f"<p>{text}</p>", "source": "de", "target": "en",
                                           "format": "html"}).json()["translatedText"],
               post(server, "/translate", {"q": text, "source": "fr", "target": "de"}).json()["translatedText"]]
    v1 = post(server, "/v1/translate", {"texts": [text], "source": "de", "target": "en", "n_best": 2}).json()["translations"][0]
    answers += [v1["text"], *(alt["text"] for alt in v1.get("alternatives", []))]
    assert v1["tokens"][0] == "<2en>" and v1["tokens"][2] == "<2de>"  # the model did write them
    for answer in answers:
        assert answer.strip() and not any(s in answer for s in specials), answer


def test_files_and_html_go_through_english_too(server, model):
    """Issue 50 (also seen): /translate_file refused a pivot direction that /languages lists. A .txt
    file, an .html file and HTML in /translate now go fr -> en -> de, the tags placed through the
    pivot (each output word linked to the source word its English word came from)."""
    import re

    beam = model.cfg.search.beam_size
    texts = ["chien rouge maison", "chat bleu"]
    english = [r.text for r in model.translate(texts, source_lang="fr", target_lang="en", beam_size=beam)]
    german = [r.text for r in model.translate(english, source_lang="en", target_lang="de", beam_size=beam)]
    sent = httpx.post(server.url + "/translate_file", data={"source": "fr", "target": "de"},
                      files={"file": ("a.txt", ("\n".join(texts) + "\n").encode())}, timeout=60)
    assert sent.status_code == 200, sent.text
    assert httpx.get(sent.json()["translatedFileUrl"], timeout=60).text == "\n".join(german) + "\n"
    html = post(server, "/translate", {"q": "<p><b>chien</b> rouge maison</p>", "source": "fr", "target": "de",
                                       "format": "html"}).json()
    assert html["pivot"] == "en" and "<b>" in html["translatedText"]
    assert re.sub(r"<[^>]+>", "", html["translatedText"]).split() == german[0].split()
    sent = httpx.post(server.url + "/translate_file", data={"source": "fr", "target": "de"},
                      files={"file": ("a.html", b"<p><b>chien</b> rouge maison</p>")}, timeout=60)
    assert sent.status_code == 200, sent.text
    page = httpx.get(sent.json()["translatedFileUrl"], timeout=60).text
    assert re.sub(r"<[^>]+>", "", page).split() == german[0].split() and "<b>" in page


def test_pivot_alignments_compose():
    from attnmt.documents.markup import AlignedTranslation, through_pivot

    first = AlignedTranslation("A B C", ["x", "y"], ["A", "B", "C"], [(1, 0), (0, 1), (0, 2)])
    second = AlignedTranslation("P Q", ["A", "B", "C"], ["P", "Q"], [(2, 0), (0, 1)])
    joined = through_pivot(first, second)
    assert joined.source_words == ["x", "y"] and joined.target_words == ["P", "Q"]
    assert joined.alignment == [(0, 0), (1, 1)]  # P <- C <- x; Q <- A <- y
