"""`attnmt export RUN --format hf`: a folder that transformers' MarianMTModel and MarianTokenizer
load, and that translates as the run does; refused, with the reasons, for a run Marian cannot
express."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from support import parts  # noqa: E402
transformers = parts.require_transformers()  # skips the module without the extra attnmt[hf]

from support import marian_toy  # noqa: E402
from test_marian_exactness import generate  # noqa: E402

from attnmt.config import Config, config_from_dict  # noqa: E402
from attnmt.errors import AttnmtError  # noqa: E402
from attnmt.interop.marian import export_marian, marian_expressible  # noqa: E402
from attnmt.run_dir import RunDir  # noqa: E402
from attnmt.translator import Translator  # noqa: E402


def test_export_loads_in_transformers_and_translates_as_the_run(marian_folder, marian_run, tmp_path):
    out = tmp_path / "exported"
    done = subprocess.run([sys.executable, "-m", "attnmt", "export", str(marian_run), "--format", "hf", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    model = transformers.MarianMTModel.from_pretrained(out).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(out)
    original = transformers.MarianMTModel.from_pretrained(marian_folder).eval()
    theirs, ours = original.state_dict(), model.state_dict()
    assert set(theirs) == set(ours)
    for name in theirs:  # a round trip changes no weight (the position tables are the formula's, of any length)
        rows = min(theirs[name].shape[0], ours[name].shape[0]) if "embed_positions" in name else None
        assert torch.equal(theirs[name][:rows], ours[name][:rows]), name
    translator = Translator.load(marian_run, device="cpu")
    sentences = marian_toy.SENTENCES + [src for src, _ in marian_toy.toy.copy_pairs(10, seed=98)]
    for beam in (1, 3):
        results = translator.translate(sentences, beam_size=beam, length_penalty=0.0, replace_unk=False)
        for sentence, result in zip(sentences, results):
            assert translator.pipeline.tgt_vocab.encode(result.tokens) == generate(model, tokenizer, sentence, beam)


def test_a_fine_tuned_run_exports_its_own_weights(marian_run, tmp_path):
    """A run with other weights (as fine-tuning leaves it): the export holds them, not the original's."""
    run = RunDir(tmp_path / "run")
    import shutil
    shutil.copytree(marian_run, run.path)
    model = run.load_model()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.01 * torch.randn_like(param))
    from attnmt.checkpoint import save_weights
    save_weights(model, run.path / "changed.safetensors")
    out = export_marian(run.path, tmp_path / "out", checkpoint="changed.safetensors")
    exported = transformers.MarianMTModel.from_pretrained(out).eval()
    assert torch.equal(exported.lm_head.weight, model.generator.weight.detach())
    assert torch.equal(exported.final_logits_bias[0], model.generator.bias.detach())
    with pytest.raises(AttnmtError, match="exists and is not empty"):
        export_marian(run.path, out)


def test_runs_marian_cannot_express_are_refused_with_every_reason(marian_run):
    pipeline = RunDir(marian_run).pipeline()
    assert marian_expressible(RunDir(marian_run).config(), pipeline) == []
    native = config_from_dict({"model": {"arch": "transformer"}})  # attnmt's defaults: pre-norm, interleaved
    problems = marian_expressible(native, pipeline)
    assert any("model.pre_norm=true" in p for p in problems)
    assert any("model.positions='sinusoidal'" in p for p in problems)
    assert marian_expressible(Config(), pipeline) == ["model.arch='rnn' (Marian is a Transformer)"]
    pipeline.src_tokenizer.lowercase = True  # a run trained on lowercased text: MarianTokenizer would not lowercase
    assert marian_expressible(RunDir(marian_run).config(), pipeline) == [
        "data.lowercase=true (MarianTokenizer gives the model the text as it is)"]
