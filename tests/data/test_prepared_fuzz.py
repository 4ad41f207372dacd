"""Generated damage to prepared data (Hypothesis): whatever is changed in the manifest, and whatever
bytes are changed in an array file (its digest updated too, so that the structure checks are
what stands in the way), opening it raises DataError naming a file, or opens data that reads
every pair within its arrays and its vocabulary. Nothing else: no other exception, no crash."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import toy
from attnmt.config import config_from_dict
from attnmt.data.prepare import prepare
from attnmt.data.prepared import ARRAYS, PreparedData
from attnmt.files import sha256_file
from attnmt.errors import DataError

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8)


@pytest.fixture(scope="module")
def prepared_folder(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("fuzz")
    corpus = toy.write_corpus(base / "toy")
    data = config_from_dict(yaml.safe_load(toy.config_text(corpus, data={"train_subset": 60}))).data
    return prepare(data, workers=1, root=base / "cache").folder


def _copy(folder: Path, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("case") / "data"
    shutil.copytree(folder, target)
    return target


def _opens_or_refuses(folder: Path) -> None:
    try:
        data = PreparedData.open(folder)
    except DataError as err:
        assert str(folder) in str(err) or "manifest" in str(err)
        return
    vocab = (len(data.pipeline.src_vocab), len(data.pipeline.tgt_vocab))
    for side, size in zip(("src", "tgt"), vocab):
        for ids in data.ids(side, np.arange(len(data))):
            assert len(ids) and int(ids.max()) < size


def _paths(obj, prefix=()):
    """Every place in a JSON document: (path of keys / indices)."""
    yield prefix
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _paths(value, prefix + (i,))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_changed_manifest_is_refused_or_harmless(prepared_folder, tmp_path_factory, data):
    folder = _copy(prepared_folder, tmp_path_factory)
    manifest = json.loads((folder / "manifest.json").read_text())
    places = list(_paths(manifest))[1:]
    where = data.draw(st.sampled_from(places))
    parent = manifest
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = data.draw(JSON)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    _opens_or_refuses(folder)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(ARRAYS), position=st.floats(0, 1, exclude_max=True), value=st.integers(0, 255),
       cut=st.booleans())
def test_changed_array_bytes_are_refused_or_harmless_even_with_their_digest_updated(
        prepared_folder, tmp_path_factory, name, position, value, cut):
    folder = _copy(prepared_folder, tmp_path_factory)
    path = folder / "part000" / f"{name}.npy"
    raw = bytearray(path.read_bytes())
    at = int(position * len(raw))
    if cut:
        del raw[at:]
    else:
        raw[at] = value
    path.write_bytes(bytes(raw))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][f"part000/{name}.npy"] = {"bytes": len(raw), "sha256": sha256_file(path)}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    _opens_or_refuses(folder)
