"""Config reading bounds (issue 24 items 2 and 9): a hostile config file, run config.json or ``--set``
value ends in one `ConfigError` naming the file (and line or dotted key), quickly, never in a hang,
gigabytes of memory, a RecursionError or another exception."""

import subprocess
import sys
from pathlib import Path

import pytest

from attnmt.config import config_from_dict, load_config, load_saved_config
from attnmt.errors import ConfigError

SRC = Path(__file__).resolve().parents[1] / "src"


def write(tmp_path, text, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def laughs(levels: int, width: int = 10) -> str:
    """The YAML "billion laughs": each level is `width` aliases of the level before."""
    lines = ['l0: &l0 "lol"']
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


# ----------------------------------------------------------------------------- item 2: aliases


def test_the_issues_billion_laughs_is_refused_in_seconds(tmp_path):
    """Issue 24 item 2: 9 levels ran past 60 s and 1.2 GB. Run apart, so a hang fails the test."""
    path = write(tmp_path, "train:\n  " + laughs(9).replace("\n", "\n  ") + "lr: *l9\n")
    code = ("import sys\nfrom attnmt.config import load_config\nfrom attnmt.errors import ConfigError\n"
            "try:\n    load_config(sys.argv[1], ['train.lr=0.1'])\nexcept ConfigError as err:\n    print(err)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cfg.yaml" in done.stdout and "alias" in done.stdout, done.stdout


@pytest.mark.parametrize("levels", [4, 5, 7])
def test_alias_expansion_is_bounded_before_any_key_is_checked(tmp_path, levels):
    # under an unknown section, so that only the expansion can be refused first
    text = "junk:\n  " + laughs(levels).replace("\n", "\n  ")
    with pytest.raises(ConfigError, match=r"cfg.yaml.*(alias|values)"):
        load_config(write(tmp_path, text))


def test_a_recursive_alias_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"cfg.yaml.*(recursive|deeper)"):
        load_config(write(tmp_path, "train:\n  betas: &b [0.9, *b]\n"))


def test_a_few_aliases_still_work_and_overrides_touch_only_their_key(tmp_path):
    path = write(tmp_path, "data: &empty {}\nmodel: *empty\ntrain:\n  lr: &rate 0.01\n  min_lr: *rate\n")
    cfg = load_config(path, ["data.min_freq=3"])  # the shared mapping must not carry it into model
    assert cfg.train.lr == cfg.train.min_lr == 0.01 and cfg.data.min_freq == 3


def test_an_override_value_is_read_within_the_same_bounds(tmp_path):
    path = write(tmp_path, "")
    value = "[" + ", ".join(["&a [1, 1, 1, 1, 1, 1, 1, 1]"] + ["*a"] * 200) + "]"
    with pytest.raises(ConfigError, match=r"train.betas.*(alias|values)|alias"):
        load_config(path, [f"train.betas={value}"])
    with pytest.raises(ConfigError, match=r"deeper"):
        load_config(path, ["train.betas=" + nested(50_000)])


# ----------------------------------------------------------------------------- item 9: depth and size


# 50,000 levels (the issue's case) are also past the size limit, which may answer first
@pytest.mark.parametrize("depth, message", [(100, "nested deeper than"), (10_000, "nested deeper than"),
                                            (50_000, "nested deeper than|larger than")])
def test_deep_yaml_is_refused(tmp_path, depth, message):
    with pytest.raises(ConfigError, match=rf"cfg.yaml(:\d+)?: .*({message})"):
        load_config(write(tmp_path, "train:\n  betas: " + nested(depth) + "\n"))
    with pytest.raises(ConfigError, match=rf"cfg.yaml(:\d+)?: .*({message})"):
        load_config(write(tmp_path, "train:\n  betas: " + nested(depth, "{a: ", "}") + "\n"))


@pytest.mark.parametrize("depth, message", [(100, "nested deeper than"), (30_000, "nested deeper than"),
                                            (50_000, "nested deeper than|larger than")])
def test_deep_run_config_json_is_refused(tmp_path, depth, message):
    path = write(tmp_path, '{"train": {"betas": ' + nested(depth) + "}}", "config.json")
    with pytest.raises(ConfigError, match=rf"config.json: .*({message})"):
        load_saved_config(path)


def test_deep_plain_data_is_refused():
    value: list = []
    for _ in range(50_000):
        value = [value]
    with pytest.raises(ConfigError, match=r"train.betas.* nested deeper than"):
        config_from_dict({"train": {"betas": value}}, source="x")


def test_a_config_file_larger_than_the_limit_is_refused_before_parsing(tmp_path):
    big = "#" + "x" * 2_000_000 + "\n"
    with pytest.raises(ConfigError, match=r"cfg.yaml: .*larger than"):
        load_config(write(tmp_path, big))
    with pytest.raises(ConfigError, match=r"config.json: .*larger than"):
        load_saved_config(write(tmp_path, '{"train": {}}' + " " * 2_000_000, "config.json"))


@pytest.mark.parametrize("text, message", [
    ("train:\n  lr: 2020-13-45\n", r"cfg.yaml: not valid YAML"),   # a date PyYAML matches but cannot build
    ("train:\n  epochs: !!int abc\n", r"cfg.yaml: not valid YAML"),
    ("train:\n  epochs: " + "9" * 5000 + "\n", r"cfg.yaml: not valid YAML"),  # past Python's int digits limit
    ("train:\n  lr: 2020-01-01\n", r"train.lr must be float, got date"),
])
def test_yaml_values_python_cannot_build_are_config_errors(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_a_json_number_past_pythons_digit_limit_is_a_config_error(tmp_path):
    path = write(tmp_path, '{"train": {"epochs": ' + "9" * 5000 + "}}", "config.json")
    with pytest.raises(ConfigError, match=r"config.json: not valid JSON"):
        load_saved_config(path)


def test_a_huge_value_is_shown_short_in_the_message(tmp_path):
    with pytest.raises(ConfigError, match=r"train.lr must be float") as err:
        load_config(write(tmp_path, "train:\n  lr: [" + ", ".join(["1"] * 5000) + "]\n"))
    assert len(str(err.value)) < 300
    with pytest.raises(ConfigError, match=r"model.arch=.* is not one of") as err:
        config_from_dict({"model": {"arch": "x" * 100_000}})
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("value", ['!!int ""', '!!float ""', '!!bool ""', '!!timestamp ""', "!!int 0x"])
def test_explicit_tags_pyyaml_cannot_build_are_config_errors(tmp_path, value):
    """Found by tests/test_config_fuzz.py: PyYAML raises IndexError, KeyError or AttributeError here."""
    with pytest.raises(ConfigError, match=r"cfg.yaml: not valid YAML"):
        load_config(write(tmp_path, f"train:\n  epochs: {value}\n"))
    with pytest.raises(ConfigError, match=r"cfg.yaml: train.epochs must be int, got str"):
        load_config(write(tmp_path, ""), [f"train.epochs={value}"])  # not YAML on the command line: a string


def test_a_yaml_syntax_error_is_one_line_naming_file_line_and_column(tmp_path):
    with pytest.raises(ConfigError, match=r"^\S*cfg.yaml:3:1: not valid YAML: [^\n]*$"):
        load_config(write(tmp_path, "train:\n  lr: [1,\n"))


@pytest.mark.parametrize("key", ["\n", "a\nb", "k" * 100_000, 10**4000])
def test_an_unknown_key_or_section_is_named_on_one_short_line(key):
    """Found by tests/test_config_fuzz.py (deep profile): a key holding a newline broke the message in two."""
    for raw, message in [({"data": {key: 1}}, r"unknown key data\."), ({key: {}}, r"unknown section ")]:
        with pytest.raises(ConfigError, match=message) as err:
            config_from_dict(raw, source="x")
        assert "\n" not in str(err.value) and len(str(err.value)) < 400
