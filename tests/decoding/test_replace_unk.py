"""<unk> replacement (issue 21 item 7): a tiny copy model whose target vocabulary lacks most
words learns to emit <unk> for them; the translator copies the source word the position attends
to most instead, for both models and both engines, unless switched off."""

import pytest

from support import toy
from attnmt.data.vocab import Vocab
from attnmt.translator import Translator

pytestmark = pytest.mark.learned  # asserts what a small training learned (make test-seeds)



def rare_word_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Copy-task pairs with one rare token (a made-up name like "q4711", seen once) copied at the
    same position on both sides: with data.min_freq=2 it is <unk> in both vocabularies."""
    import random

    rng = random.Random(seed)
    pairs = []
    for src, tgt in toy.copy_pairs(n, seed):
        src_words, tgt_words = src.split(), tgt.split()
        at, name = rng.randrange(len(src_words)), f"q{rng.randrange(10**6)}"
        pairs.append((" ".join(src_words[:at] + [name] + src_words[at:]),
                      " ".join(tgt_words[:at] + [name] + tgt_words[at:])))
    return pairs


# measured (greedy and beam 3): rnn 5/20 and transformer 17/20 on an AMD EPYC; the transformer
# 8/20 on an Intel Xeon (2026-12-02): the same 12 epochs learn the copy to a different point on
# each CPU's arithmetic, so the floor sits below both, well above chance (one source position in 7)
MIN_COPIED = {"rnn": 0.2, "transformer": 0.3}
TEST_PAIRS = rare_word_pairs(20, 99)
TEST_SOURCES = [src for src, _ in TEST_PAIRS]


def train_small_vocab(base, arch: str):
    """A run on rare_word_pairs whose vocabularies keep the tokens seen at least twice."""
    from attnmt.cli import main

    folder = base / "data"
    folder.mkdir()
    for split, n, seed in (("train", 600, 1), ("valid", 40, 2), ("test", 40, 3)):
        pairs = rare_word_pairs(n, seed)
        (folder / f"{split}.de").write_text("\n".join(s for s, _ in pairs) + "\n")
        (folder / f"{split}.en").write_text("\n".join(t for _, t in pairs) + "\n")
    config = base / "unk.yaml"
    config.write_text(toy.config_text(folder, arch, epochs=8 if arch == "rnn" else 12, data=dict(min_freq=2),
                                      train=dict(eval_max_sentences=8)))
    assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
    return base / "run"


@pytest.fixture(scope="module")
def unk_runs(tmp_path_factory):
    return {arch: train_small_vocab(tmp_path_factory.mktemp(f"unk_{arch}"), arch) for arch in ("rnn", "transformer")}


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
@pytest.mark.parametrize("beam", [1, 3])
def test_unk_becomes_the_attended_source_word(unk_runs, arch, beam):
    translator = Translator.load(unk_runs[arch], device="cpu")
    assert translator.replaces_unk  # moses: on by default
    raw = translator.translate(TEST_SOURCES, beam_size=beam, replace_unk=False, n_best=beam)
    fixed = translator.translate(TEST_SOURCES, beam_size=beam, n_best=beam)
    unknowns = sum(r.tokens.count(Vocab.UNK) for r in raw)
    assert unknowns >= 10, "the toy model should emit <unk> for the words its vocabulary lacks"
    copied_in_place = 0
    for before, after in zip(raw, fixed):
        assert Vocab.UNK not in after.text and Vocab.UNK not in after.tokens
        assert after.replaced == [i for i, t in enumerate(before.tokens) if t == Vocab.UNK]
        assert before.replaced == []
        for i, token in enumerate(after.tokens):
            if i in after.replaced:
                assert token == after.source_tokens[int(after.attention[i].argmax())]
                copied_in_place += token.startswith("q")  # the rare name, copied
            else:
                assert token == before.tokens[i]
        for alt_before, alt_after in zip(before.alternatives, after.alternatives):  # n-best too
            assert Vocab.UNK not in alt_after.text
            assert len(alt_after.tokens) == len(alt_before.tokens)
        assert after.alternatives[0].text == after.text
    # the attention finds the rare name for many of them (a measured floor: the tiny RNN's
    # attention lags a word behind at times, the Transformer's rarely)
    assert copied_in_place >= MIN_COPIED[arch] * unknowns


def test_search_replace_unk_false_switches_it_off(unk_runs, tmp_path):
    from attnmt.cli import main

    translator = Translator.load(unk_runs["rnn"], device="cpu")
    off = Translator(translator.model, translator.pipeline,
                     translator.cfg.replace(search=translator.cfg.search.__class__(replace_unk=False)))
    assert not off.replaces_unk
    raw = off.translate(TEST_SOURCES, beam_size=1)
    assert any(Vocab.UNK in r.tokens for r in raw) and not any(r.replaced for r in raw)
    # an <unk> left unreplaced stands for no word: its tokens keep it, its text never shows it (issue 50)
    assert not any(Vocab.UNK in r.text for r in raw)
    src = tmp_path / "in.de"
    src.write_text("\n".join(TEST_SOURCES) + "\n")
    assert main(["translate", str(unk_runs["rnn"]), "-i", str(src), "-o", str(tmp_path / "on.en")]) == 0
    assert main(["translate", str(unk_runs["rnn"]), "-i", str(src), "-o", str(tmp_path / "off.en"),
                 "--no-replace-unk"]) == 0
    on, off = ((tmp_path / name).read_text() for name in ("on.en", "off.en"))
    assert Vocab.UNK not in on and Vocab.UNK not in off
    copied = [sum(word.startswith("q") for word in text.split()) for text in (on, off)]
    assert copied[0] >= 3 and copied[1] == 0  # the rare names come out only when <unk>s are replaced


def test_replace_unk_must_be_a_bool(unk_runs):
    with pytest.raises(ValueError, match="replace_unk"):
        Translator.load(unk_runs["rnn"], device="cpu").translate(["Hund ."], replace_unk="yes")


def test_ctranslate2_replaces_the_same_words(unk_runs, tmp_path):
    pytest.importorskip("ctranslate2")
    from attnmt.cli import main

    export = tmp_path / "ct2"
    assert main(["export", str(unk_runs["transformer"]), "-o", str(export)]) == 0
    native = Translator.load(unk_runs["transformer"], device="cpu")
    ct2 = Translator.load(export, engine="ctranslate2")
    native_results = native.translate(TEST_SOURCES, beam_size=1, layer=-1)  # the exported layer
    ct2_results = ct2.translate(TEST_SOURCES, beam_size=1)
    assert sum(len(r.replaced) for r in ct2_results) >= 10
    for a, b in zip(native_results, ct2_results):
        assert (a.tokens, a.replaced, a.text) == (b.tokens, b.replaced, b.text)


def test_sentencepiece_runs_are_unchanged_by_default(tmp_path):
    """A sentencepiece run does not replace (search.replace_unk null = off for pieces)."""
    from attnmt.cli import main

    config = toy.write_config(tmp_path / "spm.yaml", "copy", "rnn", epochs=1,
                              data=dict(tokenizer="sentencepiece", spm_vocab_size=60))
    assert main(["train", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    translator = Translator.load(tmp_path / "run", device="cpu")
    assert not translator.replaces_unk
    default = translator.translate(TEST_SOURCES + ["Iglu ."], beam_size=1)
    raw = translator.translate(TEST_SOURCES + ["Iglu ."], beam_size=1, replace_unk=False)
    assert [r.tokens for r in default] == [r.tokens for r in raw]
    assert all(r.replaced == [] for r in default)
