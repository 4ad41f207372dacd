"""Config loading: types, choices, cross-field rules and overrides, each error naming file and key."""

import json

import pytest

from attnmt.config import Config, load_config, load_saved_config, save_config
from attnmt.errors import ConfigError


def write(tmp_path, text, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_and_yaml_values(tmp_path):
    path = write(tmp_path, "model:\n  arch: transformer\n  d_model: 64\n  heads: 4\ntrain:\n  lr: 1e-3\n  betas: [0.9, 0.98]\n")
    cfg = load_config(path)
    assert cfg.model.d_model == 64 and cfg.model.heads == 4
    assert cfg.train.lr == pytest.approx(1e-3)  # YAML 1.1 reads 1e-3 as a string; we accept it
    assert cfg.train.betas == (0.9, 0.98)
    assert cfg.data == Config().data


def test_empty_file_gives_defaults(tmp_path):
    assert load_config(write(tmp_path, "")) == Config()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("train:\n  lrr: 1\n", r"cfg.yaml: unknown key train.lrr"),
        ("training:\n  lr: 1\n", r"cfg.yaml: unknown section 'training'"),
        ("train:\n  lr: fast\n", r"cfg.yaml: train.lr must be float, got str 'fast'"),
        ("train:\n  epochs: 2.5\n", r"train.epochs must be int"),
        ("train:\n  epochs: true\n", r"train.epochs must be int"),
        ("model:\n  arch: lstm\n", r"model.arch='lstm' is not one of 'rnn', 'transformer'"),
        ("model:\n  arch: transformer\n  heads: 6\n", r"model.heads=6 must divide model.d_model=256"),
        ("model:\n  dropout: -0.1\n", r"model.dropout=-0.1 must be in \[0, 1\)"),
        ("search:\n  beam_size: 0\n", r"search.beam_size=0 must be positive"),
        ("data:\n  src_lang: xx\n", r"data.src_lang='xx': Multi30k has de, en, fr, cs"),
        ("data:\n  corpus: files\n", r"data.train must name your training data"),
        ("train: 3\n", r"train must be a mapping"),
        ("- a\n- b\n", r"top level must be a mapping"),
        ("train: [\n", r"not valid YAML"),
    ],
)
def test_bad_configs_name_file_and_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope.yaml: config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_overrides_are_validated_like_the_file(tmp_path):
    path = write(tmp_path, "train:\n  lr: 0.001\n")
    cfg = load_config(path, ["train.lr=3e-4", "model.dropout=0.1", "train.max_minutes=null"])
    assert cfg.train.lr == pytest.approx(3e-4) and cfg.model.dropout == 0.1 and cfg.train.max_minutes is None
    with pytest.raises(ConfigError, match=r"cfg.yaml: unknown key train.lrate"):
        load_config(path, ["train.lrate=1"])
    with pytest.raises(ConfigError, match=r"search.beam_size=0 must be positive"):
        load_config(path, ["search.beam_size=0"])
    with pytest.raises(ConfigError, match=r"must look like section.key=value"):
        load_config(path, ["lr=1"])


def test_saved_config_round_trips(tmp_path):
    cfg = load_config(write(tmp_path, "model:\n  arch: transformer\ntrain:\n  betas: [0.9, 0.98]\n"))
    save_config(cfg, tmp_path / "config.json")
    assert load_saved_config(tmp_path / "config.json") == cfg
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match=r"bad.json: not valid JSON"):
        load_saved_config(tmp_path / "bad.json")
    assert json.loads((tmp_path / "config.json").read_text())["model"]["arch"] == "transformer"


def test_shipped_configs_are_valid():
    from pathlib import Path

    configs = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))
    for path in configs:
        load_config(path)
