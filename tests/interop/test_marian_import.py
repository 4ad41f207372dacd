"""`attnmt import`: what it writes (a run like any other, with its integrity checks), and what it
refuses, each time naming the file and the field."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch

from support import parts  # noqa: E402
parts.require_transformers()  # skips the module without the extra attnmt[hf]

from support import marian_toy  # noqa: E402

from attnmt.errors import AttnmtError, CheckpointError  # noqa: E402
from attnmt.interop.marian import import_marian  # noqa: E402
from attnmt.run_dir import RunDir  # noqa: E402


def attnmt(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnmt", *args], capture_output=True, text=True, input=input,
                          timeout=300)


def test_import_cli_writes_a_run_that_translates_and_is_verified(marian_folder, tmp_path):
    run_dir = tmp_path / "run"
    done = attnmt("import", str(marian_folder), "-o", str(run_dir))
    assert done.returncode == 0, done.stderr
    run = RunDir(run_dir)
    cfg = run.config()
    assert (cfg.model.activation, cfg.model.positions, cfg.model.pre_norm) == ("swish", "sinusoidal_halves", False)
    assert (cfg.data.corpus, cfg.data.src_lang, cfg.data.tgt_lang) == ("multi30k", "de", "en")
    vocab = run.pipeline().tgt_vocab
    assert (vocab.itos[vocab.eos_id], vocab.bos_id, vocab.pad_id, vocab.suppressed) == ("</s>", len(vocab) - 1,
                                                                                         len(vocab) - 1, ("<pad>",))
    done = attnmt("translate", str(run_dir), "--device", "cpu", "--beam", "2", input="Hund rot .\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Dog red ."
    again = attnmt("import", str(marian_folder), "-o", str(run_dir))  # a run is never replaced silently
    assert again.returncode == 2 and "already holds a run" in again.stderr
    vocab_file = run_dir / "vocab.tgt.json"
    vocab_file.write_text(vocab_file.read_text(encoding="utf-8").replace("</s>", "<s>"), encoding="utf-8")
    done = attnmt("translate", str(run_dir), "--device", "cpu", input="Hund rot .\n")
    assert done.returncode == 2 and "vocab.tgt.json" in done.stderr and "sha256" in done.stderr


def edited(folder, tmp_path, name: str, edit) -> object:
    """A copy of the Marian folder with one JSON file edited."""
    copy = tmp_path / "edited"
    shutil.copytree(folder, copy)
    path = copy / name
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return copy


@pytest.mark.parametrize("name,edit,match", [
    ("config.json", lambda c: c.update(model_type="bart"), r"config.json: model_type='bart' is not 'marian'"),
    ("config.json", lambda c: c.update(activation_function="tanh"), r"activation_function='tanh' is not supported"),
    ("config.json", lambda c: c.update(normalize_before=True), r"normalize_before=True is not supported"),
    ("config.json", lambda c: c.update(decoder_attention_heads=4), r"decoder_attention_heads=4 differs"),
    ("config.json", lambda c: c.update(decoder_ffn_dim=8), r"decoder_ffn_dim=8 differs"),
    ("config.json", lambda c: c.update(d_model="32"), r"d_model='32' must be an integer"),
    ("config.json", lambda c: c.update(vocab_size=60), r"vocab.json: holds \d+ tokens, but config.json says vocab_size=60"),
    ("config.json", lambda c: c.update(pad_token_id=10_000), r"pad_token_id=10000 is outside the vocabulary"),
    ("config.json", lambda c: c.update(architectures=["MarianForCausalLM"]), r"architectures=.* does not name"),
    ("config.json", lambda c: c.update(scale_embedding="yes"), r"scale_embedding='yes' must be true or false"),
    ("generation_config.json", lambda c: c.update(bad_words_ids=[[3, 4]]), r"bad_words_ids=.* is not supported"),
    ("tokenizer_config.json", lambda c: c.update(separate_vocabs=True), r"separate_vocabs=True is not supported"),
    ("tokenizer_config.json", lambda c: c.pop("source_lang"), r"names no source_lang"),
    ("tokenizer_config.json", lambda c: c.update(source_lang="../../etc"),  # issue 50: a path, not a language
     r"tokenizer_config.json: source_lang='../../etc' is not a language code"),
    ("tokenizer_config.json", lambda c: c.update(target_lang="ROMANCE"), r"target_lang='ROMANCE' is not a language code"),
    ("vocab.json", lambda v: v.update({"extra": 0}), r"vocab.json: expected \{token: id\} with the ids"),
])
def test_unsupported_settings_are_refused_naming_the_field(marian_folder, tmp_path, name, edit, match):
    folder = edited(marian_folder, tmp_path, name, edit)
    with pytest.raises(AttnmtError, match=match):
        import_marian(folder, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_pickles_are_read_only_with_weights_only(marian_folder, tmp_path):
    from safetensors.torch import load_file

    folder = tmp_path / "bin"
    shutil.copytree(marian_folder, folder)
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(tensors, folder / "pytorch_model.bin")  # a plain state dict: weights_only loads it
    run = import_marian(folder, tmp_path / "run")
    reference = import_marian(marian_folder, tmp_path / "reference")
    assert all(torch.equal(a, b) for a, b in zip(run.load_model().state_dict().values(),
                                                 reference.load_model().state_dict().values()))

    class Payload:  # a pickle that would call a function when loaded
        def __reduce__(self):
            return (print, ("this pickle runs code",))
    torch.save({"model.shared.weight": Payload()}, folder / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin: refused: .*weights_only=True"):
        import_marian(folder, tmp_path / "run2")


def test_missing_files_and_folders_are_named(marian_folder, tmp_path):
    with pytest.raises(AttnmtError, match="not a folder"):
        import_marian(tmp_path / "nowhere", tmp_path / "run")
    folder = tmp_path / "partial"
    shutil.copytree(marian_folder, folder)
    (folder / "target.spm").write_bytes(b"not a sentencepiece model")
    with pytest.raises(AttnmtError, match="target.spm: not a sentencepiece model"):
        import_marian(folder, tmp_path / "run")
    (folder / "vocab.json").unlink()
    with pytest.raises(CheckpointError, match=r"vocab.json: not found"):
        import_marian(folder, tmp_path / "run")


def test_tied_tensors_that_differ_are_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = marian_toy.write_marian(tmp_path / "m")
    tensors = load_file(folder / "model.safetensors")
    tensors["lm_head.weight"] = tensors["model.shared.weight"] + 1.0
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="lm_head.weight differs from the target embeddings"):
        import_marian(folder, tmp_path / "run")
