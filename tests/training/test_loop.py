"""The training loop's guards: non-finite steps are skipped without touching the weights, and
too many in a row stop training with a clear error."""

import json
import math

import pytest
import torch

from attnmt.cli import main
from attnmt.config import TrainConfig, load_config
from attnmt.data.vocab import Vocab
from attnmt.errors import AttnmtError
from attnmt.models.rnn import RNNSeq2Seq
from attnmt.models.loss import sequence_loss
from attnmt.training import loop, train
from attnmt.training.trainable import make_step_schedule

from support import toy


def poison_every(monkeypatch, predicate):
    """Make the model's logits NaN on the calls for which predicate(call_number) is true."""
    original = RNNSeq2Seq.forward
    calls = {"n": 0}

    def forward(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if self.training:
            calls["n"] += 1
            if predicate(calls["n"]):
                return out._replace(logits=out.logits * float("nan"))
        return out

    monkeypatch.setattr(RNNSeq2Seq, "forward", forward)


def test_bad_steps_are_skipped_and_logged(tmp_path, toy_config, monkeypatch):
    poison_every(monkeypatch, lambda n: n in (3, 4, 10))
    cfg = load_config(toy_config, ["train.epochs=1"])
    train(cfg, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    bad = [r for r in rows if r["event"] == "bad_step"]
    assert [r["batch"] for r in bad] == [3, 4, 10] and all(r["examples"] for r in bad)
    epoch = [r for r in rows if r["event"] == "epoch"][0]
    assert epoch["val_loss"] == epoch["val_loss"]  # finite: the NaN steps never reached the weights
    from attnmt.checkpoint import load_weights_file

    weights = load_weights_file(tmp_path / "run" / json.loads((tmp_path / "run" / "last.json").read_text())["file"])
    assert all(torch.isfinite(t).all() for t in weights.values())


def test_too_many_bad_steps_stop_training(tmp_path, toy_config, monkeypatch):
    poison_every(monkeypatch, lambda n: n >= 2)
    cfg = load_config(toy_config, ["train.epochs=1", "train.max_bad_steps=3"])
    with pytest.raises(AttnmtError, match=r"3 consecutive non-finite steps \(train.max_bad_steps=3\)"):
        train(cfg, tmp_path / "run")


def test_sequence_loss_ignores_padding():
    logits = torch.randn(2, 3, 5)
    gold = torch.tensor([[1, 2, 0], [3, 0, 0]])
    expected = sum(-torch.log_softmax(logits[b, t], -1)[gold[b, t]] for b, t in [(0, 0), (0, 1), (1, 0)])
    torch.testing.assert_close(sequence_loss(logits, gold, pad_id=0), expected)


def _rates(cfg, updates):
    """The rate each of the first `updates` updates uses, read from the optimizer as training would."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    sched = make_step_schedule(opt, cfg)
    used = []
    for _ in range(updates):
        used.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return used


def test_inverse_sqrt_schedule_peaks_at_warmup():
    used = _rates(TrainConfig(schedule="inverse_sqrt", warmup_steps=10, lr=1.0), 40)  # update n: used[n - 1]
    assert used[0] == pytest.approx(0.1) and used[4] == pytest.approx(0.5) and used[9] == pytest.approx(1.0)
    assert used[39] == pytest.approx((10 / 40) ** 0.5) and max(used) == pytest.approx(1.0)


def test_linear_schedule_warms_up_then_falls_to_zero_at_max_updates():
    """Warmup 4 of 2.0, then a straight line from 2.0 (update 4) to 0 (update 13): the expected
    rates are written out by hand, 2.0 * (13 - n) / 9 after the warmup."""
    used = _rates(TrainConfig(schedule="linear", warmup_steps=4, max_updates=12, lr=2.0), 14)
    expected = [0.5, 1.0, 1.5, 2.0, 16 / 9, 14 / 9, 12 / 9, 10 / 9, 8 / 9, 6 / 9, 4 / 9, 2 / 9, 0.0, 0.0]
    assert used == pytest.approx(expected)


def test_cosine_schedule_is_half_a_cosine_from_peak_to_zero():
    """No warmup, 8 updates: update n uses lr * (1 + cos(pi * n / 9)) / 2 (the peak is update 0's,
    the rate 0 only after update 8), falling all the way."""
    used = _rates(TrainConfig(schedule="cosine", warmup_steps=0, max_updates=8, lr=1.0), 10)
    expected = [(1 + math.cos(math.pi * n / 9)) / 2 for n in range(1, 9)] + [0.0, 0.0]
    assert used == pytest.approx(expected)
    assert all(a > b for a, b in zip(used[:9], used[1:9])) and used[7] > 0


def test_plateau_reductions_hold_for_every_update_of_the_next_epochs(tmp_path, toy_config, monkeypatch):
    """With val BLEU falling and patience 0, the plateau schedule halves the rate after epochs 2, 3
    and 4, and every update after a halving uses the lowered rate (the per-step schedule once set it
    back to train.lr at the next update, so `plateau` trained at a constant rate)."""
    falling, real_validate = iter([30.0, 20.0, 10.0, 5.0]), loop.validate
    monkeypatch.setattr(loop, "validate", lambda *a, **k: {**real_validate(*a, **k), "val_bleu": next(falling)})
    run = tmp_path / "run"
    settings = ["train.epochs=4", "train.schedule=plateau", "train.plateau_patience=0", "train.plateau_factor=0.5",
                "train.early_stopping_metric=bleu", "train.early_stopping_patience=10", "train.lr=0.004",
                "train.log_every=1", "data.train_subset=100", "train.num_threads=1"]
    assert main(["train", str(toy_config), "--run-dir", str(run), *toy.sets(settings)]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    rates: dict[int, set] = {}
    for row in rows:
        if row["event"] == "train":
            rates.setdefault(row["epoch"], set()).add(row["lr"])
    assert rates == {1: {0.004}, 2: {0.004}, 3: {0.002}, 4: {0.001}}
    assert [row["lr"] for row in rows if row["event"] == "epoch"] == [0.004, 0.002, 0.001, 0.0005]


TINY_TRANSFORMER = ["model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=32",
                    "model.enc_layers=1", "model.dec_layers=1"]


@pytest.mark.learned  # asserts what a small training learned (make test-seeds)
@pytest.mark.parametrize("arch,amp,dtype", [("transformer", "bf16", torch.bfloat16), ("transformer", "none", torch.float32),
                                             ("transformer", "auto", torch.float32), ("rnn", "bf16", torch.bfloat16)])
def test_amp_bf16_autocasts_both_models_on_cpu(tmp_path, toy_config, monkeypatch, arch, amp, dtype):
    """bf16 logits only under autocast (`auto` means CUDA only). The RNN's GRU stays float32 under
    autocast and its states take bf16, so attention meets one dtype on every device."""
    from attnmt.models.rnn import RNNSeq2Seq
    from attnmt.models.transformer import TransformerSeq2Seq

    cls = TransformerSeq2Seq if arch == "transformer" else RNNSeq2Seq
    seen = set()
    original = cls.forward

    def forward(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if self.training:
            seen.add(out.logits.dtype)
        return out

    monkeypatch.setattr(cls, "forward", forward)
    arch_settings = TINY_TRANSFORMER if arch == "transformer" else ["model.arch=rnn"]
    cfg = load_config(toy_config, ["train.epochs=1", "data.train_subset=160", "train.device=cpu", f"train.amp={amp}",
                                   *arch_settings])
    train(cfg, tmp_path / "run")
    assert seen == {dtype}
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # it trained, and finitely: below the untrained model's ~ln V (a uniform guess) by a clear margin (measured,
    # 10 updates: 2.26-2.83 against ln V = 3.50 over seeds 1-3; before: `< 10`, which no model fails)
    val_loss = [r for r in rows if r["event"] == "epoch"][0]["val_loss"]
    uniform = math.log(len(Vocab.load(tmp_path / "run" / "vocab.tgt.json")))
    assert math.isfinite(val_loss) and val_loss < uniform - 0.35, (val_loss, uniform)


def test_accumulated_update_is_the_gradient_of_the_summed_loss_over_all_its_tokens(tmp_path, toy_config):
    """accum_steps=2 against an update written out by hand: one Adam step on the summed
    cross-entropy of two batches divided by their target tokens together."""
    import torch.nn.functional as F

    from attnmt.data.epochs import Batching, Epoch
    from attnmt.data.pipeline import TextPipeline
    from attnmt.data.prepare import prepare
    from attnmt.models import build_model

    cfg = load_config(toy_config, ["train.epochs=1", "data.train_subset=64", "train.accum_steps=2", "train.clip=0",
                                   "model.dropout=0.0"])  # 64 pairs, 4 batches of 16: 2 updates
    run = tmp_path / "run"
    train(cfg, run)

    pipeline = TextPipeline.load(run)
    vocab = pipeline.tgt_vocab
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id, bos_id=vocab.bos_id,
                        eos_id=vocab.eos_id)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, betas=cfg.train.betas)
    epoch = Epoch(prepare(cfg.data), [1.0], Batching(16, seed=cfg.train.seed), 1)  # epoch 1's batches, in order
    batches = [epoch.build(examples) for examples in epoch.batches()]
    assert len(batches) == 4
    model.train()
    for pair in (batches[0:2], batches[2:4]):
        total, tokens = 0.0, 0
        for b in pair:
            logits = model(b.src_ids, b.src_mask, b.src_lengths, b.tgt_in).logits
            total = total + F.cross_entropy(logits.reshape(-1, logits.size(-1)), b.tgt_out.reshape(-1),
                                            ignore_index=vocab.pad_id, reduction="sum")
            tokens += int((b.tgt_out != vocab.pad_id).sum())
        (total / tokens).backward()
        optimizer.step()
        optimizer.zero_grad()
    from attnmt.checkpoint import load_weights_file

    trained = load_weights_file(run / "checkpoints" / "epoch_001.safetensors")
    # Two float32 summation orders (two backward passes against one summed loss) differ by ~1e-7 in
    # the gradients; Adam's first step divides by their magnitude, so a weight whose gradient is
    # near zero moves up to ~2e-6 apart (seen on an AVX2 host). A wrong normalisation (per batch
    # instead of per update) moves weights by ~1e-3 (lr 1e-2 times the batches' weight shift).
    for name, value in model.state_dict().items():
        torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-5, msg=name)


def test_compiled_step_is_refused_with_accumulation(tmp_path):
    """train.compile's faster steps take one batch an update: accumulation is refused, naming both keys."""
    from attnmt.config import TrainConfig
    from attnmt.errors import AttnmtError
    from attnmt.training.compiled_step import make_update_step

    cfg = TrainConfig(compile="default", accum_steps=2)
    with pytest.raises(AttnmtError, match=r"train.compile='default' runs one process with train.accum_steps=1"):
        make_update_step(None, None, None, cfg, use_amp=False, pad_id=0)


def test_training_logs_the_post_norm_advice_once(tmp_path, toy_config, caplog):
    overrides = ["train.epochs=1", "model.arch=transformer", "model.d_model=16", "model.heads=2",
                 "model.ff_dim=32", "model.enc_layers=1", "model.dec_layers=1", "model.pre_norm=false"]
    with caplog.at_level("WARNING", logger="attnmt.training"):
        train(load_config(toy_config, overrides), tmp_path / "run")
    advice = [r.message for r in caplog.records if "post-norm" in r.message]
    assert len(advice) == 1 and "model.pre_norm=true" in advice[0]


def test_a_lowercased_run_is_validated_against_lowercased_references(tmp_path, monkeypatch):
    """data.lowercase: the model writes no capitals, so its val BLEU (and the best checkpoint and
    early stopping, which use it) compares with lowercased references, not the cased ones it could
    never match."""
    import sacrebleu

    folder = toy.write_corpus(tmp_path / "toy")
    for split in ("train", "valid", "test"):  # capitalized targets: "Dog Red"
        path = folder / f"{split}.en"
        path.write_text(path.read_text(encoding="utf-8").title(), encoding="utf-8")
    config = tmp_path / "toy.yaml"
    config.write_text(toy.config_text(folder, epochs=1, data={"lowercase": True}), encoding="utf-8")
    seen, real_score = [], loop.score_translations
    monkeypatch.setattr(loop, "score_translations", lambda hyps, refs, **k: seen.append((hyps, refs)) or real_score(hyps, refs, **k))
    run = tmp_path / "run"
    assert main(["train", str(config), "--run-dir", str(run), *toy.sets(["train.num_threads=1"])]) == 0
    [(hyps, refs)] = seen
    cased = (folder / "valid.en").read_text(encoding="utf-8").splitlines()[:len(refs)]
    assert refs == [line.lower() for line in cased] and any(line != line.lower() for line in cased)
    assert all(h == h.lower() for h in hyps)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    [epoch] = [row for row in rows if row["event"] == "epoch"]
    assert epoch["val_bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=0.006)
