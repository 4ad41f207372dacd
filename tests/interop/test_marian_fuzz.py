"""The importer's readers of config.json, generation_config.json, tokenizer_config.json and
vocab.json on any JSON: each either reads it or refuses it with a CheckpointError naming the
file (never another exception). Needs no transformers."""

from __future__ import annotations

import json

from support.fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from attnmt.errors import CheckpointError
from attnmt.interop.marian import MarianSettings, read_settings, read_vocab

FIELDS = ["model_type", "architectures", "activation_function", "d_model", "encoder_layers", "decoder_layers",
          "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "vocab_size",
          "decoder_vocab_size", "pad_token_id", "eos_token_id", "decoder_start_token_id", "scale_embedding",
          "share_encoder_decoder_embeddings", "tie_word_embeddings", "normalize_before", "bad_words_ids",
          "dropout", "num_beams", "encoder_layerdrop"]
VALID = {"model_type": "marian", "architectures": ["MarianMTModel"], "activation_function": "swish", "d_model": 8,
         "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
         "encoder_ffn_dim": 16, "decoder_ffn_dim": 16, "vocab_size": 5, "pad_token_id": 4, "eos_token_id": 0,
         "decoder_start_token_id": 4, "scale_embedding": True}
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-3, 70_000) | st.floats(allow_nan=True)
                      | st.sampled_from(["marian", "swish", "gelu", "MarianMTModel", "x"]),
                      lambda inner: st.lists(inner, max_size=3), max_leaves=8)


@fuzz(ci=80, deep=3000)
@given(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=8),
       st.dictionaries(st.sampled_from(["bad_words_ids", "num_beams"]), VALUES, max_size=2))
def test_any_config_is_read_or_refused_by_name(tmp_path_factory, changes, generation):
    folder = tmp_path_factory.mktemp("config")
    (folder / "config.json").write_text(json.dumps({**VALID, **changes}), encoding="utf-8")
    (folder / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    try:
        settings = read_settings(folder)
    except CheckpointError as err:
        assert str(folder) in str(err)
    else:
        assert isinstance(settings, MarianSettings) and 0 <= settings.pad_id < settings.vocab_size


@fuzz(ci=80, deep=3000)
@given(st.dictionaries(st.text(max_size=4), VALUES, max_size=7),
       st.dictionaries(st.sampled_from(["unk_token", "separate_vocabs", "source_lang"]), VALUES, max_size=3))
def test_any_vocab_is_read_or_refused_by_name(tmp_path_factory, mapping, tokenizer):
    folder = tmp_path_factory.mktemp("vocab")
    (folder / "vocab.json").write_text(json.dumps(mapping), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    settings = MarianSettings({}, vocab_size=max(len(mapping), 1), pad_id=0, eos_id=min(1, len(mapping) - 1),
                              start_id=0, suppressed_ids=[], beam_size=None, share=True, tie=True)
    try:
        vocab = read_vocab(folder, settings)
    except CheckpointError as err:
        assert str(folder) in str(err)
    else:
        assert len(vocab) == len(mapping)
