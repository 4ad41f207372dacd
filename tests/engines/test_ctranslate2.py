"""CTranslate2 export and engine: every mapping difference, and the same results as the native
engine (greedy token for token, beams for >= 99% of sentences, scores to 1e-4)."""

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("ctranslate2")

from attnmt.cli import main  # noqa: E402
from attnmt.engines.ctranslate2_export import export_run  # noqa: E402
from attnmt.errors import AttnmtError, CheckpointError  # noqa: E402
from attnmt.translator import Translator  # noqa: E402

SOURCES = ["hund katze haus", "rot blau", "mann frau kind ball wasser", "baum", "groß klein auto rot hund katze",
           "unbekannt wort hund", ""]


def _pair(run_dir, out_dir, **export_args):
    export_run(run_dir, out_dir, **export_args)
    return Translator.load(run_dir, device="cpu"), Translator.load(out_dir, engine="ctranslate2")


def _sentences(run_dir, split):
    corpus = json.loads((run_dir / "config.json").read_text())["data"][split]
    return (open(corpus + ".de", encoding="utf-8").read().splitlines(),
            open(corpus + ".en", encoding="utf-8").read().splitlines())


# ----------------------------------------------------------------------------- mapping (random weights)

@pytest.mark.parametrize("pre_norm,share,tie,positions", [
    (True, False, False, "sinusoidal"),   # separate embeddings, separate output layer
    (True, True, True, "sinusoidal"),     # one embedding for source, target and output
    (False, False, True, "sinusoidal"),   # post-norm (no final LayerNorms), tied output layer
    (False, True, False, "learned"),      # post-norm, shared embeddings, learned positions
])
def test_export_scores_and_greedy_match_native(tmp_path, random_run, pre_norm, share, tie, positions):
    run = random_run(tmp_path / "run", pre_norm=pre_norm, share=share, tie=tie, positions=positions)
    native, ct2 = _pair(run, tmp_path / "ct2")
    targets = ["dog cat", "", "man woman child ball water red", "tree", "big", "unknown dog", "dog"]
    for a, b in zip(native.score(SOURCES, targets), ct2.score(SOURCES, targets)):
        assert a.num_tokens == b.num_tokens
        if a.source_tokens:
            assert abs(a.log_prob - b.log_prob) < 1e-4
        else:
            assert np.isnan(a.log_prob) and np.isnan(b.log_prob)
    for a, b in zip(native.translate(SOURCES, beam_size=1), ct2.translate(SOURCES, beam_size=1)):
        assert a.tokens == b.tokens  # random weights run to the length budget: every step checked
        assert a.source_tokens == b.source_tokens
        assert abs(a.score - b.score) < 1e-4


@pytest.mark.parametrize("layer", [0, -1])
def test_attention_is_the_exported_layer_averaged_over_heads(tmp_path, random_run, layer):
    run = random_run(tmp_path / "run")
    native, ct2 = _pair(run, tmp_path / "ct2", attention_layer=layer)
    a = native.translate(SOURCES[:5], beam_size=1, layer=layer)
    b = ct2.translate(SOURCES[:5], beam_size=1)
    for ra, rb in zip(a, b):
        assert rb.attention.shape == (len(rb.tokens), len(rb.source_tokens))
        np.testing.assert_allclose(ra.attention, rb.attention, atol=1e-4)
    assert ct2.translate(SOURCES[:1], beam_size=1, layer=layer % 3)[0].tokens == b[0].tokens  # 3 decoder layers
    with pytest.raises(ValueError, match="attention of decoder layer"):
        ct2.translate(SOURCES[:1], beam_size=1, head=0)
    with pytest.raises(ValueError, match="attention of decoder layer"):
        ct2.translate(SOURCES[:1], beam_size=1, layer=1)


def test_export_writes_the_specials_and_vocabularies(tmp_path, random_run):
    run = random_run(tmp_path / "run", share=True, tie=True)
    out = export_run(run, tmp_path / "ct2")
    config = json.loads((out / "config.json").read_text())
    assert (config["unk_token"], config["bos_token"], config["eos_token"]) == ("<unk>", "<bos>", "<eos>")
    assert config["decoder_start_token"] == "<bos>"
    assert not config["add_source_bos"] and not config["add_source_eos"]
    assert config["layer_norm_epsilon"] == pytest.approx(1e-5)
    itos = json.loads((run / "vocab.src.json").read_text())["tokens"]
    assert json.loads((out / "shared_vocabulary.json").read_text()) == itos


def test_rnn_run_is_refused_with_a_clear_error(tmp_path):
    from attnmt.files import write_json
    from attnmt.config import config_from_dict

    run = tmp_path / "rnn"
    run.mkdir()
    write_json(run / "config.json", config_from_dict({"model": {"arch": "rnn"}}).to_dict())
    with pytest.raises(AttnmtError, match="CTranslate2 has no RNN models"):
        export_run(run, tmp_path / "out")
    assert main(["export", str(run), "-o", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_engine_and_folder_must_agree(tmp_path, random_run):
    run = random_run(tmp_path / "run")
    export_run(run, tmp_path / "ct2")
    with pytest.raises(AttnmtError, match="attnmt export"):
        Translator.load(run, engine="ctranslate2")
    with pytest.raises(AttnmtError, match="engine='ctranslate2'"):
        Translator.load(tmp_path / "ct2")
    with pytest.raises(AttnmtError, match="exists"):
        export_run(run, tmp_path / "ct2")


# ----------------------------------------------------------------------------- trained models

@pytest.fixture(scope="module")
def prenorm_pair(prenorm_run, tmp_path_factory):
    return _pair(prenorm_run, tmp_path_factory.mktemp("export") / "ct2")


@pytest.mark.parametrize("which", ["prenorm", "postnorm"])
def test_trained_greedy_is_token_for_token_and_beams_agree(which, request, tmp_path):
    run = request.getfixturevalue(f"{which}_run")
    native, ct2 = _pair(run, tmp_path / "ct2")
    sources = _sentences(run, "test")[0] + _sentences(run, "valid")[0]
    a, b = native.translate(sources, beam_size=1), ct2.translate(sources, beam_size=1)
    assert [r.tokens for r in a] == [r.tokens for r in b]
    assert max(abs(x.score - y.score) for x, y in zip(a, b)) < 1e-4
    a, b = native.translate(sources, beam_size=5), ct2.translate(sources, beam_size=5)
    same = [x.tokens == y.tokens for x, y in zip(a, b)]
    assert sum(same) >= 0.99 * len(sources)
    assert max(abs(x.score - y.score) for x, y, s in zip(a, b, same) if s) < 1e-4


def test_trained_nbest_lists_agree(prenorm_pair, prenorm_run):
    native, ct2 = prenorm_pair
    sources = _sentences(prenorm_run, "test")[0][:30]
    a = native.translate(sources, beam_size=4, n_best=3)
    b = ct2.translate(sources, beam_size=4, n_best=3)
    agree = 0
    for x, y in zip(a, b):
        assert len(x.alternatives) == len(y.alternatives) == 3
        assert [alt.score for alt in y.alternatives] == sorted((alt.score for alt in y.alternatives), reverse=True)
        agree += [alt.tokens for alt in x.alternatives] == [alt.tokens for alt in y.alternatives]
    assert agree >= 0.9 * len(sources)  # lower-ranked entries may swap on near-ties


def test_trained_scores_agree(prenorm_pair, prenorm_run):
    native, ct2 = prenorm_pair
    sources, references = _sentences(prenorm_run, "test")
    for x, y in zip(native.score(sources, references), ct2.score(sources, references)):
        assert x.num_tokens == y.num_tokens
        assert abs(x.log_prob - y.log_prob) < 1e-4


def test_int8_export_stores_int8_weights_and_translates(prenorm_run, tmp_path):
    # A 32-wide model loses much to int8 (its quality is measured on Multi30k: docs/performance.md);
    # here: the weights are quantized and every sentence is translated.
    export_run(prenorm_run, tmp_path / "f32")
    export_run(prenorm_run, tmp_path / "int8", quantization="int8")
    # linear and embedding weights shrink 4x; biases, LayerNorms and the position table stay float32
    assert (tmp_path / "int8" / "model.bin").stat().st_size < 0.7 * (tmp_path / "f32" / "model.bin").stat().st_size
    int8 = Translator.load(tmp_path / "int8", engine="ctranslate2")
    sources = _sentences(prenorm_run, "test")[0]
    results = int8.translate(sources, beam_size=2)
    assert len(results) == len(sources) and all(r.tokens and np.isfinite(r.score) for r in results)


def test_exported_folder_stands_alone_through_the_cli(prenorm_run, tmp_path, capsys):
    export = tmp_path / "export"
    assert main(["export", str(prenorm_run), "-o", str(export)]) == 0
    moved = tmp_path / "elsewhere"
    shutil.copytree(export, moved)  # nothing in it points back to the run
    shutil.rmtree(export)
    sources, references = _sentences(prenorm_run, "test")
    (tmp_path / "in.de").write_text("\n".join(sources[:5]) + "\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text("\n".join(references[:5]) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", str(moved), "--engine", "ctranslate2", "-i", str(tmp_path / "in.de"),
                 "--beam", "1"]) == 0
    texts = capsys.readouterr().out.splitlines()
    native = Translator.load(prenorm_run, device="cpu").translate(sources[:5], beam_size=1)
    assert texts == [r.text for r in native]
    assert main(["score", str(moved), "--engine", "ctranslate2", "-i", str(tmp_path / "in.de"),
                 "-r", str(tmp_path / "ref.en")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 5
    assert main(["evaluate", str(moved), "--engine", "ctranslate2", "--split", "test", "--beam", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["engine"] == "ctranslate2" and report["bleu"] > 0 and np.isfinite(report["ppl"])
    assert main(["attention", str(moved), "--engine", "ctranslate2", sources[0], "-o",
                 str(tmp_path / "a.png")]) == 0
    assert (tmp_path / "a.png").stat().st_size > 0


def test_long_inputs_are_cut_alike_and_threads_follow_torch(tmp_path, random_run):
    import torch

    run = random_run(tmp_path / "run")
    native, ct2 = _pair(run, tmp_path / "ct2")
    assert (ct2.engine.inter_threads, ct2.engine.intra_threads) == (torch.get_num_threads(), 1)
    long = " ".join(["hund", "katze"] * 140)  # 280 tokens: cut to search.max_input_tokens=250
    a, b = native.translate([long], beam_size=1)[0], ct2.translate([long], beam_size=1)[0]
    assert len(a.source_tokens) == len(b.source_tokens) == 250
    assert a.warnings == b.warnings and "cut" in b.warnings[0]
    assert a.tokens == b.tokens


def test_ctranslate2_sampling_is_seedable(tmp_path, random_run):
    run = random_run(tmp_path / "run")
    _, ct2 = _pair(run, tmp_path / "ct2")
    kwargs = dict(beam_size=1, sampling_topk=4, sampling_temperature=1.5)
    a = ct2.translate(SOURCES, seed=3, **kwargs)
    assert [r.tokens for r in a] == [r.tokens for r in ct2.translate(SOURCES, seed=3, **kwargs)]
    assert [r.tokens for r in a] != [r.tokens for r in ct2.translate(SOURCES, beam_size=1)]


@pytest.mark.parametrize("name", ["model.bin", "attnmt_config.json", "vocab.tgt.json", "attnmt_export.json"])
def test_a_damaged_export_is_refused_naming_the_file(tmp_path, random_run, name):
    run_dir = random_run(tmp_path / "run")
    out = export_run(run_dir, tmp_path / "export")
    data = bytearray((out / name).read_bytes())
    data[len(data) // 2] ^= 0x04
    (out / name).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=rf"{name}: corrupted or changed since it was written"):
        Translator.load(out, engine="ctranslate2")


def test_opening_exports_leaves_torch_threads_alone(tmp_path, random_run):
    """CTranslate2 sets the process's OpenMP thread count to intra_threads (1) when it opens a
    model, which torch reads as its own; load_export restores it, so torch keeps its threads and
    a second export opened in the process gets the same default inter_threads as the first."""
    import torch

    run = random_run(tmp_path / "run")
    export_run(run, tmp_path / "f32")
    export_run(run, tmp_path / "int8", quantization="int8")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        first = Translator.load(tmp_path / "f32", engine="ctranslate2")
        first.translate(SOURCES[:2], beam_size=2)
        assert torch.get_num_threads() == 2
        second = Translator.load(tmp_path / "int8", engine="ctranslate2")
        assert (first.engine.inter_threads, second.engine.inter_threads) == (2, 2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
