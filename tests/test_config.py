"""Config loading: types, choices, cross-field rules and overrides, each error naming file and key."""

import json
import re

import yaml

import pytest

from attnmt.config import Config, advisories, load_config, load_saved_config, save_config
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
        # settings that would be accepted and then ignored are refused, naming the key
        ("model:\n  arch: transformer\ntrain:\n  teacher_forcing: 0.5\n",
         r"cfg.yaml: train.teacher_forcing=0.5 applies to model.arch='rnn' only"),
        ("train:\n  device: gpu\n", r"cfg.yaml: train.device='gpu' must be auto, cpu, cuda, cuda:N or mps"),
        ("train:\n  device: cuda:x\n", r"train.device='cuda:x' must be"),
        ("train:\n  schedule: linear\n", r"train.schedule='linear' decays to zero at train.max_updates: set "
         r"train.max_updates above train.warmup_steps=4000 \(got train.max_updates=None\)"),
        ("train:\n  schedule: cosine\n  warmup_steps: 50\n  max_updates: 50\n",
         r"cfg.yaml: train.schedule='cosine' decays .*warmup_steps=50 \(got train.max_updates=50\)"),
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


def test_rnn_teacher_forcing_and_moses_lowercase_still_accepted(tmp_path):
    cfg = load_config(write(tmp_path, "train:\n  teacher_forcing: 0.5\ndata:\n  lowercase: true\n"))
    assert cfg.train.teacher_forcing == 0.5 and cfg.data.lowercase


def test_lowercase_with_sentencepiece_is_accepted_and_lowercases(tmp_path, toy_corpus):
    """Accepted, and it reaches what the data are prepared with: another cache key, and target and
    source tokenizers that lowercase (before: it only read back the value it wrote)."""
    from support import toy
    from attnmt.data.cache import make_plan
    from attnmt.data.tokenizer_training import train_tokenizers
    from attnmt.data.tokenizers import tokenizer_from_dict

    plans = {}
    for lowercase in (False, True):
        text = toy.config_text(toy_corpus, data=dict(tokenizer="sentencepiece", lowercase=lowercase, spm_vocab_size=60))
        cfg = load_config(write(tmp_path, text))
        assert cfg.data.tokenizer == "sentencepiece" and cfg.data.lowercase is lowercase
        plans[lowercase] = make_plan(cfg.data)
    assert plans[True].key != plans[False].key
    folder = tmp_path / "tokenizers"
    folder.mkdir()
    for settings in train_tokenizers(plans[True], folder):
        tokenizer = tokenizer_from_dict(settings, folder)
        assert tokenizer.lowercase and tokenizer.tokenize("HUND ROT .") == tokenizer.tokenize("hund rot .")


@pytest.mark.parametrize("corpus", ["files", "none", "multi30k"])
@pytest.mark.parametrize("key, value", [("src_lang", "../../etc"), ("tgt_lang", "en/../../x"), ("src_lang", "DE"),
                                        ("tgt_lang", "")])
def test_src_and_tgt_lang_pass_the_one_language_code_rule(tmp_path, toy_corpus, corpus, key, value):
    """Issue 50: data.src_lang: ../../etc was accepted and used in a path (train.../../etc). Every
    corpus kind (an imported model's 'none' too) refuses it, naming the key."""
    from support import toy

    sections = yaml.safe_load(toy.config_text(toy_corpus))
    sections["data"].update({key: value, "corpus": corpus})
    if corpus != "files":
        for split in ("train", "valid", "test"):
            del sections["data"][split]
    with pytest.raises(ConfigError, match=rf"cfg.yaml: data.{key}={re.escape(repr(value))} must be a language code"):
        load_config(write(tmp_path, yaml.safe_dump(sections)))


def test_shipped_configs_are_valid_and_found_by_name(tmp_path, monkeypatch):
    from pathlib import Path

    root = Path(__file__).parents[1]
    shipped = sorted((root / "src" / "attnmt" / "configs").glob("*.yaml"))
    assert {p.stem for p in shipped} >= {"multi30k_rnn", "multi30k_transformer", "quickstart_rnn"}
    # the clone's top-level configs/ is the same folder, not a copy
    assert sorted(p.name for p in (root / "configs").glob("*.yaml")) == [p.name for p in shipped]
    assert (root / "configs").resolve() == (root / "src" / "attnmt" / "configs").resolve()
    monkeypatch.chdir(tmp_path)  # a folder with no configs/
    for path in shipped:
        assert load_config(path.stem) == load_config(path) == load_config(path.name)
    assert load_config("multi30k_transformer").model.arch == "transformer"


def test_the_budget_counts_in_lower_case_unless_the_model_learned_capitals(tmp_path):
    """search.budget_in_lower_case left unset follows data.augment.uppercase: a model taught to
    answer capitals in capitals needs their pieces in its budget; set, it is kept as set."""
    assert Config().search.budget_in_lower_case is True
    assert load_config("multi30k_transformer").search.budget_in_lower_case is True
    assert load_config("multi30k_multilingual").search.budget_in_lower_case is True  # every rate 0
    taught = "data:\n  augment:\n    uppercase: 0.1\n"
    assert load_config(write(tmp_path, taught)).search.budget_in_lower_case is False
    kept = load_config(write(tmp_path, taught + "search:\n  budget_in_lower_case: true\n"))
    assert kept.search.budget_in_lower_case is True
    saved = tmp_path / "saved.json"
    save_config(kept, saved)
    assert load_saved_config(saved) == kept


def test_a_name_that_is_neither_file_nor_packaged_lists_the_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"multi30k_lstm: config file not found, and not the name of a "
                                          r"packaged config \(multi30k_multilingual, multi30k_rnn, multi30k_transformer"):
        load_config("multi30k_lstm")
    with pytest.raises(ConfigError, match=r"sub/multi30k_rnn.yaml: config file not found"):
        load_config("sub/multi30k_rnn.yaml")  # a path is a path: no fallback to the packaged one
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError, match=r"folder: is a folder"):
        load_config("folder")


def test_a_local_file_wins_over_a_packaged_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "multi30k_rnn.yaml").write_text("train:\n  epochs: 3\n")
    assert load_config("multi30k_rnn.yaml").train.epochs == 3


@pytest.mark.parametrize("text, advised", [
    ("model:\n  arch: transformer\n  pre_norm: false\ntrain:\n  schedule: constant\n", True),
    ("model:\n  arch: transformer\n  pre_norm: false\ntrain:\n  schedule: plateau\n", True),
    ("model:\n  arch: transformer\n  pre_norm: false\ntrain:\n  schedule: inverse_sqrt\n", False),
    ("model:\n  arch: transformer\n  pre_norm: false\ntrain:\n  schedule: linear\n  warmup_steps: 3\n"
     "  max_updates: 9\n", False),
    ("model:\n  arch: transformer\n  pre_norm: false\ntrain:\n  schedule: cosine\n  warmup_steps: 0\n"
     "  max_updates: 9\n", True),
    ("model:\n  arch: transformer\n  pre_norm: true\ntrain:\n  schedule: constant\n", False),
    ("model:\n  arch: rnn\n  pre_norm: false\ntrain:\n  schedule: constant\n", False),
])
def test_post_norm_without_warmup_is_advised_against_naming_the_keys(tmp_path, text, advised):
    notes = advisories(load_config(write(tmp_path, text)))
    if advised:
        assert len(notes) == 1 and "model.pre_norm=false" in notes[0] and "train.schedule=" in notes[0]
        assert "model.pre_norm=true" in notes[0] and "inverse_sqrt" in notes[0]
    else:
        assert notes == []


def test_shipped_configs_need_no_advice():
    from pathlib import Path

    for path in sorted((Path(__file__).parents[1] / "src" / "attnmt" / "configs").glob("*.yaml")):
        assert advisories(load_config(path)) == [], path.name
