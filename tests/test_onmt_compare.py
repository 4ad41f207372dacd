"""benchmarks/onmt_compare.py, the OpenNMT-py side of the quality-per-update comparison: its
OpenNMT-py config describes the same model and training as configs/onmt_compare_transformer.yaml,
its log parsing reads OpenNMT-py's report lines, and bad arguments are refused. OpenNMT-py itself is
not installed here; the comparison's figures are in docs/results.md."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import yaml

from attnmt.config import load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def onmt_compare():
    spec = importlib.util.spec_from_file_location("onmt_compare", ROOT / "benchmarks" / "onmt_compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        {"step": 10, "loss": round(math.log(3895.0), 4), "tgt_tokens": 16130},
        {"step": 20, "loss": round(math.log(985.6), 4), "tgt_tokens": 17440}]


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
