"""benchmarks/peers/onmt_compare.py, the OpenNMT-py side of the quality-per-update comparison: its
OpenNMT-py config describes the same model and training as configs/onmt_compare_transformer.yaml,
its log parsing reads OpenNMT-py's report lines, bad arguments are refused, and a run with stand-in
OpenNMT-py tools scores their output with attnmt's evaluation. OpenNMT-py itself is not installed
here; the comparison's figures are in docs/results.md."""

from __future__ import annotations

import json
import math
import stat

import pytest
import yaml

from attnmt.config import load_config
from attnmt.data.corpus import load_multi30k
from attnmt.data.tokenizers import MosesTokenizer
from benchmarks.common import REPO as ROOT
from benchmarks.common import rows
from benchmarks.peers import onmt_compare as onmt_compare_module


@pytest.fixture(scope="module")
def onmt_compare():
    return onmt_compare_module


def test_the_onmt_config_is_the_attnmt_config(onmt_compare, tmp_path):
    onmt = yaml.safe_load(onmt_compare.onmt_config(tmp_path, [227, 454]))
    cfg = load_config(ROOT / "configs" / "onmt_compare_transformer.yaml")
    m, t = cfg.model, cfg.train
    assert m.pre_norm  # OpenNMT-py's Transformer is pre-norm only
    assert (onmt["encoder_type"], onmt["decoder_type"]) == ("transformer", "transformer")
    assert (onmt["enc_layers"], onmt["dec_layers"]) == (m.enc_layers, m.dec_layers)
    assert onmt["hidden_size"] == onmt["word_vec_size"] == m.d_model
    assert (onmt["heads"], onmt["transformer_ff"]) == (m.heads, m.ff_dim)
    assert onmt["dropout"] == [m.dropout] and onmt["attention_dropout"] == [m.attn_dropout]
    assert onmt["position_encoding"] and m.positions == "sinusoidal"
    assert not onmt["share_embeddings"] and not m.share_embeddings
    assert not onmt["share_decoder_embeddings"] and not m.tie_embeddings
    assert (onmt["batch_type"], onmt["batch_size"]) == ("sents", t.batch_size) and t.batch_by == "sentences"
    assert onmt["accum_count"] == [t.accum_steps]
    assert (onmt["optim"], onmt["learning_rate"]) == (t.optimizer, t.lr)
    assert [onmt["adam_beta1"], onmt["adam_beta2"]] == list(t.betas)
    assert onmt["decay_method"] == "none" and t.schedule == "constant"
    assert onmt["label_smoothing"] == t.label_smoothing and onmt["max_grad_norm"] == t.clip
    assert onmt["seed"] == t.seed
    assert (onmt["save_checkpoint_steps"], onmt["train_steps"]) == (227, 454)
    assert cfg.data.tokenizer == "moses" and cfg.data.lowercase  # what prepare() writes


def test_report_lines_become_a_loss_curve(onmt_compare, tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        "[2026-11-23 20:09:36,572 INFO] * number of parameters: 13978088\n"
        "[2026-11-23 20:10:35,734 INFO] Step 10/  454; acc: 12.6; ppl: 3895.0; xent: 8.3; lr: 0.00050; "
        "sents:    1280; bsz: 1510/1613/128; 255/273 tok/s;     59 sec;\n"
        "[2026-11-23 20:11:09,553 INFO] Step 20/  454; acc: 17.1; ppl: 985.6; xent: 6.9; lr: 0.00050; "
        "sents:    1280; bsz: 1472/1744/128; 435/516 tok/s;     93 sec;\n")
    assert onmt_compare.loss_curve(log) == [
        {"kind": "loss", "step": 10, "loss": round(math.log(3895.0), 4), "tgt_tokens": 16130},
        {"kind": "loss", "step": 20, "loss": round(math.log(985.6), 4), "tgt_tokens": 17440}]


def test_missing_opennmt_tools_and_bad_steps_are_refused(onmt_compare, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        onmt_compare.main([str(tmp_path / "out"), "--onmt-bin", str(tmp_path)])
    assert exit_info.value.code == 2 and "no onmt_build_vocab there" in capsys.readouterr().err
    for tool in ("onmt_build_vocab", "onmt_train", "onmt_translate"):
        (tmp_path / tool).touch()
    with pytest.raises(SystemExit) as exit_info:
        onmt_compare.main([str(tmp_path / "out"), "--onmt-bin", str(tmp_path), "--steps", "227", "300"])
    assert exit_info.value.code == 2 and "multiple of 227" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written before the arguments are checked


def _tool(folder, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_stand_in_tools_are_run_and_scored(onmt_compare, tmp_path, monkeypatch, multi30k_dir, check_schema):
    """Stand-ins for OpenNMT-py: training logs two report lines and leaves checkpoints, and
    translating writes the (tokenized, lowercased) references, which attnmt's evaluation must
    then score near 100 BLEU, lowercased."""
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    out, tools = tmp_path / "out", tmp_path / "bin"
    tools.mkdir()
    (out / "data").mkdir(parents=True)
    for split in ("train", "val", "test_2016_flickr"):  # present: prepare() leaves them as they are
        for lang in ("de", "en"):
            (out / "data" / f"{split}.{lang}").write_text("ein hund .\n" if lang == "de" else "a dog .\n")
    tok = MosesTokenizer("en", lowercase=True)
    refs = tmp_path / "refs.en"
    refs.write_text("".join(" ".join(tok.tokenize(line)) + "\n" for line in load_multi30k(
        "test_2016_flickr", "de", "en").tgt))
    _tool(tools, "onmt_build_vocab", "exit 0")
    _tool(tools, "onmt_train", f'touch "{out}/model_step_2.pt" "{out}/model_step_4.pt"\n'
          'echo "[x INFO] Step 2/  4; acc: 1.0; ppl: 100.0; xent: 4.6; bsz: 10/20/2; 1/1 tok/s;"\n'
          'echo "[x INFO] Step 4/  4; acc: 2.0; ppl: 50.0; xent: 3.9; bsz: 10/30/2; 1/1 tok/s;"')
    _tool(tools, "onmt_translate", f'while [ $# -gt 0 ]; do [ "$1" = -output ] && cp "{refs}" "$2"; shift; done')
    assert onmt_compare.main([str(out), "--onmt-bin", str(tools), "--steps", "2", "4"]) == 0
    report = json.loads((out / "summary.json").read_text())
    check_schema(report, "onmt_compare")
    assert [(r["step"], r["beam"]) for r in rows(report, "score")] == [(2, 1), (2, 5), (4, 1), (4, 5)]
    assert all(r["bleu_lc"] > 90 for r in rows(report, "score"))
    assert [(r["step"], r["tgt_tokens"]) for r in rows(report, "loss")] == [(2, 40), (4, 60)]
