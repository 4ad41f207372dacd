"""An imported Marian model computes what `transformers` computes: the same source ids, the same
log-probabilities over the whole vocabulary (float32, within 1e-4), greedy and beam outputs
token for token equal to `model.generate` (length_penalty 0, the same per-sentence budget, pad
banned, no forced eos), and the same decoded TEXT as MarianTokenizer's
`decode(ids, skip_special_tokens=True)`, pieces of the joint vocabulary that the target
sentencepiece model lacks included (issue 50 G)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from support import parts  # noqa: E402
transformers = parts.require_transformers()  # skips the module without the extra attnmt[hf]

from support import marian_toy  # noqa: E402

from attnmt.interop.marian import import_marian  # noqa: E402
from attnmt.translator import Translator  # noqa: E402

TARGETS = ["Dog red .", "Cat blue house tree .", "Man woman child", "Water big small ball car .", "Zebra dog", "Tree"]
VARIANTS = {  # every option the importer maps, on random (untrained) models
    "swish-shared-tied": dict(activation="swish"),
    "gelu-separate-untied-unscaled": dict(activation="gelu", share=False, tie=False, scale_embedding=False, seed=1),
    "relu-shared-untied": dict(activation="relu", tie=False, layers=1, heads=4, seed=2),
}


def hf_model(folder):
    model = transformers.MarianMTModel.from_pretrained(folder).eval()
    return model, transformers.MarianTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("variant", VARIANTS)
def test_log_probs_over_the_vocabulary_equal_transformers(variant, tmp_path):
    folder = marian_toy.write_marian(tmp_path / "m", **VARIANTS[variant])
    run = import_marian(folder, tmp_path / "run")
    translator = Translator.load(run.path, device="cpu")
    hf, tokenizer = hf_model(folder)
    batch = tokenizer(marian_toy.SENTENCES, text_target=TARGETS, padding=True, return_tensors="pt")
    labels = batch.pop("labels")  # (batch, tgt_len): y1 .. yn </s>, padded with pad
    pad = hf.config.pad_token_id
    tgt_in = torch.cat([torch.full_like(labels[:, :1], hf.config.decoder_start_token_id), labels[:, :-1]], dim=1)
    with torch.no_grad():
        expected = hf(**batch, decoder_input_ids=tgt_in).logits.log_softmax(-1)  # (batch, tgt_len, vocab)
        src_mask = batch["attention_mask"].bool()
        got = translator.model(batch["input_ids"], src_mask, src_mask.sum(1), tgt_in).logits.log_softmax(-1)
    real = labels != pad  # compare where there is a target token (its rows hold every vocabulary entry)
    assert got.shape == expected.shape
    assert (got - expected).abs()[real].max().item() < 1e-4
    for sentence, src_ids in zip(marian_toy.SENTENCES, batch["input_ids"].tolist()):
        assert translator.pipeline.encode_source(sentence) == [i for i in src_ids if i != pad]


def test_scores_equal_transformers(marian_folder, marian_run):
    translator = Translator.load(marian_run, device="cpu")
    hf, tokenizer = hf_model(marian_folder)
    for source, target, scored in zip(marian_toy.SENTENCES, TARGETS, translator.score(marian_toy.SENTENCES, TARGETS)):
        batch = tokenizer([source], text_target=[target], return_tensors="pt")
        with torch.no_grad():
            logp = hf(**batch).logits.log_softmax(-1)[0]  # labels shifted right from the pad token inside
        expected = logp.gather(1, batch["labels"][0][:, None])[:, 0].tolist()
        assert len(scored.token_log_probs) == len(expected)
        assert max(abs(a - b) for a, b in zip(scored.token_log_probs, expected)) < 1e-4


def generate(hf, tokenizer, sentence: str, beam: int) -> list[int]:
    """transformers' output ids, without the start token, cut at </s>: with attnmt's budget of
    floor(2.0 * source ids + 10) tokens (the run's search config: an import counts the source's ids
    as typed, search.budget_in_lower_case false), no length penalty, no forced eos."""
    batch = tokenizer([sentence], return_tensors="pt")
    budget = math.floor(2.0 * batch["input_ids"].shape[1] + 10)
    with torch.no_grad():
        out = hf.generate(**batch, num_beams=beam, do_sample=False, max_new_tokens=budget, length_penalty=0.0,
                          early_stopping=False, forced_eos_token_id=None, num_return_sequences=1)
    ids = out[0, 1:].tolist()
    return ids[:ids.index(hf.config.eos_token_id)] if hf.config.eos_token_id in ids else ids


@pytest.mark.parametrize("beam", [1, 4])
def test_greedy_and_beam_outputs_equal_generate(marian_folder, marian_run, beam):
    translator = Translator.load(marian_run, device="cpu")
    hf, tokenizer = hf_model(marian_folder)
    vocab = translator.pipeline.tgt_vocab
    sentences = marian_toy.SENTENCES + [src for src, _ in marian_toy.toy.copy_pairs(20, seed=99)]
    results = translator.translate(sentences, beam_size=beam, length_penalty=0.0, replace_unk=False)
    ended = 0
    for sentence, result in zip(sentences, results):
        expected = generate(hf, tokenizer, sentence, beam)
        assert vocab.encode(result.tokens) == expected, sentence
        assert result.text == tokenizer.decode(expected, skip_special_tokens=True)
        ended += len(expected) < math.floor(2.0 * len(translator.pipeline.encode_source(sentence)) + 10)
    assert ended >= len(sentences) // 2  # most outputs end with </s>: the comparison is not all budget cuts


def missing_from_target(folder) -> set[str]:
    """The pieces of the joint vocabulary that the target sentencepiece model lacks."""
    import sentencepiece as spm

    target = spm.SentencePieceProcessor(model_file=str(folder / "target.spm"))
    pieces = {target.id_to_piece(i) for i in range(target.get_piece_size())}
    return {t for t in marian_toy.marian_vocab(folder) if t not in pieces and t not in ("</s>", "<unk>", "<pad>")}


def test_the_text_of_any_output_ids_is_marian_tokenizers(marian_folder, marian_run):
    """Any ids the model could emit (specials anywhere, pieces only the source model has) give the
    text MarianTokenizer gives: before, such a piece kept its "▁" ("▁herum▁herumororor▁lächeln"
    where transformers writes "herum herumororor lächeln") and <unk> showed as " ⁇ "."""
    translator = Translator.load(marian_run, device="cpu")
    _, tokenizer = hf_model(marian_folder)
    vocab, missing = translator.pipeline.tgt_vocab, missing_from_target(marian_folder)
    assert len(missing) >= 5  # the toy's source and target models differ: the case occurs
    missing_ids = sorted(vocab.stoi[t] for t in missing)
    rng = random.Random(0)
    sequences = [[rng.randrange(len(vocab)) for _ in range(rng.randrange(9))] for _ in range(400)]
    sequences += [[rng.choice(missing_ids) for _ in range(rng.randrange(1, 6))] for _ in range(100)]
    with_missing = 0
    for ids in sequences:
        tokens = vocab.decode(ids, strip_special=False)
        text = translator.pipeline.target_text(tokens)
        assert text == tokenizer.decode(ids, skip_special_tokens=True), tokens
        assert "\u2581" not in text and "</s>" not in text and "<pad>" not in text and "<unk>" not in text
        with_missing += any(t in missing for t in tokens)
    assert with_missing >= 100


def test_translations_are_marian_tokenizers_text_with_pieces_the_target_model_lacks(tmp_path):
    """This random (untrained) model writes "au", a piece the target sentencepiece model lacks,
    over and over: each translation equals `generate`'s ids, and its text MarianTokenizer's
    decoding of them, character for character."""
    folder = marian_toy.write_marian(tmp_path / "m", **VARIANTS["gelu-separate-untied-unscaled"])
    translator = Translator.load(import_marian(folder, tmp_path / "run").path, device="cpu")
    hf, tokenizer = hf_model(folder)
    missing = missing_from_target(folder)
    results = translator.translate(marian_toy.SENTENCES, beam_size=1, length_penalty=0.0, replace_unk=False)
    for sentence, result in zip(marian_toy.SENTENCES, results):
        expected = generate(hf, tokenizer, sentence, 1)
        assert translator.pipeline.tgt_vocab.encode(result.tokens) == expected
        assert any(t in missing for t in result.tokens)
        assert result.text == tokenizer.decode(expected, skip_special_tokens=True), result.tokens


@pytest.mark.parametrize("engine", ["native", "ctranslate2"])
def test_sampled_translations_are_marian_tokenizers_text(marian_folder, marian_run, engine, tmp_path):
    """Sampled at a high temperature (every piece can come out, <unk> and pieces the target model
    lacks included), every alternative's text is MarianTokenizer's text of its ids, on both engines."""
    if engine == "ctranslate2":
        pytest.importorskip("ctranslate2")
        from attnmt.engines.ctranslate2_export import export_run

        export_run(marian_run, tmp_path / "ct2")
        translator = Translator.load(tmp_path / "ct2", engine="ctranslate2", device="cpu")
    else:
        translator = Translator.load(marian_run, device="cpu")
    _, tokenizer = hf_model(marian_folder)
    vocab, missing = translator.pipeline.tgt_vocab, missing_from_target(marian_folder)
    sentences = marian_toy.SENTENCES * 10
    results = translator.translate(sentences, beam_size=1, sampling_topk=0, sampling_temperature=5.0, seed=3,
                                   replace_unk=False)
    seen = 0
    for result in results:
        ids = vocab.encode(result.tokens)
        assert result.text == tokenizer.decode(ids, skip_special_tokens=True), result.tokens
        seen += any(t in missing for t in result.tokens)
    assert seen >= 10, "the samples should hold pieces the target model lacks"
