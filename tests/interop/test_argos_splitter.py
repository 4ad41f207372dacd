"""The sentence splitter an Argos package carries (interop/argos/splitter.py): the compiled
network, run here by an independent numpy forward pass of MiniSBD's contract (units and features
in, class 2 = a sentence ends at that character), splits as attnmt's own splitter does on the
cases its rules cover, and its ONNX bytes hold that network (decoded here by a protobuf reader
of the test's own). MiniSBD itself runs it in test_argos_consumers.py."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from attnmt.data.sentences import split_sentences
from attnmt.interop.argos.splitter import compile_rules, splitter_onnx

NUMERIC = re.compile(r"^[\d]+([,\.]+[\d]+)*[,\.]*$")  # MiniSBD's (stanza's) numeric feature


def forward(net, text: str) -> list[int]:
    """Class per character, computed from the net's arrays as MiniSBD's graph would (float64)."""
    units = [net.units.index(c) if c in net.units else 1 for c in text]
    features = np.array([[c.startswith(" "), c[0].isupper(), NUMERIC.match(c) is not None] for c in text], float)
    embedded = np.concatenate([net.table[units].astype(float), features], axis=1)  # (chars, channels)
    window = net.weights.shape[2]
    padded = np.concatenate([np.zeros((net.left, embedded.shape[1])), embedded,
                             np.zeros((window - 1 - net.left, embedded.shape[1]))])
    windows = np.lib.stride_tricks.sliding_window_view(padded, window, axis=0)  # (chars, channels, window)
    hits = np.maximum(0.0, np.einsum("tcw,pcw->tp", windows, net.weights.astype(float)) + net.bias)  # (chars, patterns)
    return list(np.argmax(hits @ net.votes + net.vote_bias, axis=1))


def sentences(net, text: str) -> list[str]:
    """MiniSBD's reading of the classes: a sentence ends at each class-2 character and at the end."""
    classes = forward(net, text)
    found, start = [], 0
    for i, cls in enumerate(classes):
        if cls == 2 or i == len(text) - 1:
            found.append(text[start:i + 1].strip())
            start = i + 1
    return [s for s in found if s]


def attnmt_sentences(text: str, lang: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text, lang)]


CASES = {
    "de": ["Ein Hund läuft. Eine Katze schläft.", "Er sagte: \"Komm!\" Dann ging er.",
           "Das ist Dr. Müller. Er kam am 3. Oktober. Es war schön.", "Das war im 19. Jahrhundert. Dann nicht.",
           "Mit der Nummer 10. Ein Mann kam.", "M. Dupont kam. Dann ging er.",
           "Hunde, Katzen usw. Dann kamen Vögel.", "Wie geht es? Gut! Danke.", "Preis 3.50 Euro. Nicht mehr."],
    "en": ["A dog runs. A cat sleeps.", "Mr. Smith came. He sat down.", "Is it? Yes! Fine.",
           "He said \"no.\" Then he left.", "It costs 3.50 dollars. Not more.", "J. R. Tolkien wrote it. We read it."],
}


@pytest.mark.parametrize("lang", sorted(CASES))
def test_the_network_splits_as_attnmt_on_the_cases_its_rules_cover(lang):
    net = compile_rules(lang)
    for text in CASES[lang]:
        assert sentences(net, text) == attnmt_sentences(text, lang), text


def test_hand_checked_boundaries():
    net = compile_rules("de")
    assert sentences(net, "Ein Hund. ein Hund.") == ["Ein Hund. ein Hund."]  # no capital after the stop
    assert sentences(net, "Dr. Müller kam.") == ["Dr. Müller kam."]  # an abbreviation (Moses' list)
    assert sentences(net, "Kapitel 3. Der Hund kam.") == ["Kapitel 3.", "Der Hund kam."]  # an article follows
    assert sentences(net, "am 3. Oktober.") == ["am 3. Oktober."]  # an ordinal
    assert sentences(compile_rules("en"), "in 3. Then") == ["in 3.", "Then"]  # English writes no ordinal dot
    # a list marker after a sentence: attnmt's own splitter ends the first sentence after "2."
    # (["1. Dies ist gut. 2.", "Das auch."]); the network keeps the marker with its item
    assert sentences(net, "1. Dies ist gut. 2. Das auch.") == ["1. Dies ist gut.", "2. Das auch."]


WORDS = st.sampled_from("Hund Katze läuft schläft Dr Mann 3 19 usw z.B ein Der Ein Oktober".split())
STOPS = st.sampled_from([".", "!", "?", ".\"", ",", ""])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(WORDS, min_size=1, max_size=5), STOPS), min_size=1, max_size=5))
def test_boundaries_only_where_a_stop_and_a_space_are(parts):
    """Whatever the text, a boundary is a stop (or a closing quote after one) followed by a space
    and a capital, digit or opening mark: the network never invents one elsewhere."""
    text = " ".join(" ".join(words) + stop for words, stop in parts)
    classes = forward(compile_rules("de"), text)
    for i, cls in enumerate(classes):
        if cls == 2:
            assert text[i] in ".!?\"" and text[i + 1] == " " and (text[i + 2].isupper() or text[i + 2].isdigit()
                                                                   or text[i + 2] in "\"'„“(["), (text, i)


# ----------------------------------------------------------------------------- the ONNX bytes, read back

def fields(data: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message: the test's own reader."""
    out, at = [], 0

    def varint():
        nonlocal at
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, wire, varint()))
        elif wire == 2:
            size = varint()
            out.append((number, wire, data[at:at + size]))
            at += size
        elif wire == 5:
            out.append((number, wire, struct.unpack("<f", data[at:at + 4])[0]))
            at += 4
        else:
            raise AssertionError(f"wire type {wire}")
    return out


def test_the_onnx_bytes_hold_the_network_and_minisbds_metadata():
    net = compile_rules("de")
    model = fields(splitter_onnx(net))
    metadata = {dict((n, v) for n, _, v in fields(entry))[1].decode(): dict((n, v) for n, _, v in fields(entry))[2]
                for number, _, entry in model if number == 14}
    config = json.loads(metadata["config"])
    assert config["feat_funcs"] == ["space_before", "capitalized", "numeric"] and not config["use_dictionary"]
    vocab = json.loads(metadata["vocab"])
    assert vocab["_id2unit"][:2] == ["<PAD>", "<UNK>"] and vocab["_unit2id"]["."] == vocab["_id2unit"].index(".")
    graph = fields(next(v for n, _, v in model if n == 7))
    ops = [dict((n, v) for n, _, v in fields(node))[4].decode() for number, _, node in graph if number == 1]
    assert ops == ["Gather", "Concat", "Transpose", "Conv", "Relu", "Transpose", "MatMul", "Add"]
    tensors = {}
    for number, _, body in graph:
        if number == 5:
            parts = fields(body)
            dims = tuple(v for n, _, v in parts if n == 1)
            name = next(v for n, _, v in parts if n == 8).decode()
            raw = next(v for n, _, v in parts if n == 9)
            tensors[name] = np.frombuffer(raw, "<f4").reshape(dims)
    np.testing.assert_array_equal(tensors["pattern_weights"], net.weights)
    np.testing.assert_array_equal(tensors["table"], net.table)
    np.testing.assert_array_equal(tensors["votes"], net.votes)
    inputs = [fields(v) for n, _, v in graph if n == 11]
    assert [dict((n, v) for n, _, v in i)[1].decode() for i in inputs] == ["units", "features"]
