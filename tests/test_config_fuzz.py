"""Fuzzing the config loader (issue 24): any YAML or JSON value, any YAML text (anchors and aliases
included), any mutation of the shipped configs and any ``--set`` value gives either a `Config` or
one `ConfigError`, never another exception, and quickly (hypothesis's deadline); every `Config` it
gives is finite, in range, and round-trips through save_config / load_saved_config unchanged.

The default profile runs in CI in seconds. The deep one: ``ATTNMT_FUZZ=deep pytest tests/test_config_fuzz.py``.
"""

import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest
import yaml
from hypothesis import event, example, given
from hypothesis import strategies as st

from attnmt.config import (
    FRACTIONS, RANGES, Config, config_from_dict, load_config, load_saved_config, save_config, setting,
)
from attnmt.errors import ConfigError
from support.fuzzing import fuzz

FUZZ = fuzz(200, 5000, deadline_ms=2000)  # a hang or an expansion fails here, not in CI's timeout
SHIPPED = sorted((Path(__file__).resolve().parents[1] / "src" / "attnmt" / "configs").glob("*.yaml"))
SECTIONS = {f.name: typing.get_type_hints(Config)[f.name] for f in dataclasses.fields(Config)}
KEYS = [f"{name}.{f.name}" for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
CHOICES = sorted({a for cls in SECTIONS.values() for hint in typing.get_type_hints(cls).values()
                  if typing.get_origin(hint) is typing.Literal for a in typing.get_args(hint)})


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


# ----------------------------------------------------------------------------- strategies

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.integers(min_value=-2**70, max_value=2**70), st.sampled_from([0, 1, -1, 2**63 - 1, 2**63]),
    st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 5e-324, 0.0, -0.0, 0.5]),
    st.text(max_size=20), st.sampled_from(CHOICES + ["1e-3", "1e11", "nan", ".inf", "auto", "cuda:0", ""]),
)
plain_data = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4), max_leaves=20)


def nudged(value):
    """Values near a setting's own: its type, its neighbours, its bounds and past them."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-2 * abs(value) - 2, max_value=2 * abs(value) + 2) | st.integers()
    if isinstance(value, float):
        return st.floats(min_value=-2 * abs(value) - 1, max_value=2 * abs(value) + 1) | st.floats()
    if isinstance(value, (list, tuple)):
        return st.lists(st.floats(), min_size=len(value), max_size=len(value))
    return st.just(value)


def values_for(key):
    section, name = key.split(".")
    default = Config().to_dict()[section][name]
    bounds = [v for b in ((RANGES[key].high if key in RANGES else 0),) for v in (b, b + 1, -b)]
    return st.one_of(nudged(default), st.sampled_from(bounds), scalars, plain_data)


mutations = st.lists(st.sampled_from(KEYS).flatmap(lambda k: st.tuples(st.just(k), values_for(k))), max_size=6)
sections = st.fixed_dictionaries({}, optional={
    name: st.none() | st.dictionaries(st.sampled_from([f.name for f in dataclasses.fields(cls)]) | st.text(max_size=6),
                                      scalars | plain_data, max_size=6)
    for name, cls in SECTIONS.items()})


@st.composite
def yaml_with_aliases(draw):
    """YAML text that anchors values and refers to them, up to a billion-laughs shape."""
    levels, width = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    lines = ['l0: &l0 "lol"'] + [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * width)}]" for n in range(1, levels + 1)]
    key = draw(st.sampled_from(KEYS))
    section, name = key.split(".")
    where = draw(st.sampled_from(["nested", "value", "junk", "recursive"]))
    if where == "recursive":
        return f"{section}:\n  {name}: &r [1, *r]\n"
    body = "\n".join("    " + line for line in lines)
    if where == "junk":
        return f"{section}:\n  junk:\n{body}\n"
    ref = draw(st.integers(0, levels))
    return f"{section}:\n  x:\n{body}\n  {name}: *l{ref}\n" if where == "nested" else \
        f"{section}:\n  {name}: &v [{', '.join(['1'] * width)}]\n  other: *v\n"


yaml_alphabet = st.sampled_from(list("&*[]{}:,-!|>'\"\n #%@`?<=~.\\\t0123456789eE+") + ["train", "lr", "model",
                                                                                        ".nan", "!!int ", "\t"])
yaml_texts = st.one_of(st.text(max_size=200), st.lists(yaml_alphabet, max_size=80).map("".join), yaml_with_aliases())


@st.composite
def text_mutation(draw, text):
    """`text` with up to 8 characters deleted, inserted or replaced."""
    chars = list(text)
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(chars)))
        op = draw(st.sampled_from(["delete", "insert", "replace"]))
        char = draw(st.characters() | st.sampled_from(list("[]{}&*:,-\n\"'#!")))
        if op == "delete" and at < len(chars):
            del chars[at]
        elif op == "insert":
            chars.insert(at, char)
        elif at < len(chars):
            chars[at] = char
    return "".join(chars)


# ----------------------------------------------------------------------------- the promise


def check_config(cfg: Config, folder: Path) -> None:
    """A Config the loader gave: finite and in range, and unchanged through config.json."""
    for key in [*RANGES, *FRACTIONS]:
        value = setting(cfg, key)  # "data.augment.typos": a key of a section inside a section
        assert value is None or math.isfinite(value), key
    assert all(math.isfinite(b) for b in cfg.train.betas)
    save_config(cfg, folder / "config.json")
    assert load_saved_config(folder / "config.json") == cfg


def loads_or_refuses(load, folder: Path) -> None:
    try:
        cfg = load()
    except ConfigError as err:
        event("ConfigError")
        assert str(err) and "\n" not in str(err).strip() and len(str(err)) < 2000, str(err)[:300]
        return
    event("a valid Config")
    check_config(cfg, folder)


@FUZZ
@given(raw=st.one_of(sections, plain_data))
@example(raw={"train": {"lr": math.nan}}).via("issue 24 item 11")
@example(raw={"train": {"seed": 2**70}}).via("issue 24 item 17")
def test_any_plain_data(folder, raw):
    loads_or_refuses(lambda: config_from_dict(raw if isinstance(raw, dict) else {"train": raw}), folder)


@FUZZ
@given(shipped=st.sampled_from(SHIPPED), changes=mutations, how=st.sampled_from(["yaml", "json", "override"]))
def test_shipped_configs_with_values_mutated(folder, shipped, changes, how):
    raw = yaml.safe_load(shipped.read_text())
    overrides = []
    for key, value in changes:
        section, name = key.split(".")
        if how == "override":
            overrides.append(f"{key}={yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()}")
        else:
            raw.setdefault(section, {})[name] = value
    if how == "json":
        (folder / "run.json").write_text(json.dumps(raw))  # NaN and Infinity as Python writes them
        loads_or_refuses(lambda: load_saved_config(folder / "run.json"), folder)
    else:
        (folder / "cfg.yaml").write_text(yaml.safe_dump(raw))
        loads_or_refuses(lambda: load_config(folder / "cfg.yaml", overrides), folder)


@FUZZ
@given(text=yaml_texts)
@example(text="train:\n  lr: 2020-13-45\n").via("a date PyYAML matches but cannot build")
def test_any_yaml_text(folder, text):
    (folder / "cfg.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    loads_or_refuses(lambda: load_config(folder / "cfg.yaml"), folder)


@FUZZ
@given(data=st.data(), shipped=st.sampled_from(SHIPPED))
def test_shipped_yaml_text_mutated(folder, data, shipped):
    text = data.draw(text_mutation(shipped.read_text()))
    (folder / "cfg.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    loads_or_refuses(lambda: load_config(folder / "cfg.yaml"), folder)


@FUZZ
@given(data=st.data(), depth=st.integers(0, 40_000), shipped=st.sampled_from(SHIPPED))
def test_run_config_json_mutated_or_nested(folder, data, depth, shipped):
    text = json.dumps(load_config(shipped).to_dict(), indent=2)
    text = data.draw(text_mutation(text)) if data.draw(st.booleans()) else \
        text.replace('"betas": [', '"betas": ' + "[" * depth + "[", 1).replace("]", "]" * (depth + 1), 1)
    (folder / "config.json").write_text(text, encoding="utf-8", errors="surrogatepass")
    loads_or_refuses(lambda: load_saved_config(folder / "config.json"), folder)


@FUZZ
@given(overrides=st.lists(st.one_of(
    st.sampled_from(KEYS).flatmap(lambda k: st.tuples(st.just(k), yaml_texts).map("=".join)),
    st.text(max_size=40)), max_size=4))
@example(overrides=["train.seed=1180591620717411303424"]).via("issue 24 item 17: 2**70")
@example(overrides=["train.lr=.nan", "search.length_penalty=1e308"]).via("issue 24 item 11")
def test_any_override(folder, overrides):
    (folder / "empty.yaml").write_text("")
    loads_or_refuses(lambda: load_config(folder / "empty.yaml", overrides), folder)
