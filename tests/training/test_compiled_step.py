"""The static-shape step that train.compile='cudagraphs' captures gives the eager step's loss and
gradients (float64, CPU), however far a batch is padded; its padding and buckets; the mode switch."""

import copy
import random

import pytest
import torch

from attnmt.config import TrainConfig
from attnmt.data.batching import make_batches
from attnmt.training.compiled_step import bucket_shape, make_train_step, pad_batch, static_update
from attnmt.models.transformer import TransformerSeq2Seq
from attnmt.training.step import train_step
from attnmt.training.trainable import make_step_schedule

PAD, BOS, EOS, VOCAB = 0, 2, 3, 40


def toy_batch(n: int = 6, seed: int = 0):
    rng = random.Random(seed)
    examples = [([rng.randrange(4, VOCAB) for _ in range(rng.randint(1, 7))],
                 [rng.randrange(4, VOCAB) for _ in range(rng.randint(1, 6))]) for _ in range(n)]
    return make_batches(examples, batch_size=n, shuffle=False, pad_id=PAD, bos_id=BOS, eos_id=EOS)[0]


def toy_model(pre_norm: bool = True) -> TransformerSeq2Seq:
    torch.manual_seed(0)
    return TransformerSeq2Seq(VOCAB, VOCAB, d_model=16, heads=2, ff_dim=24, enc_layers=2, dec_layers=2,
                              dropout=0.0, pre_norm=pre_norm).double()


def eager_gradients(model, batch, cfg):
    """Loss and clipped gradients of attnmt.training.step.train_step, read off an SGD(lr=1) update."""
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    loss, finite = train_step(model, batch, optimizer, make_step_schedule(optimizer, cfg), train_cfg=cfg,
                              use_amp=False, pad_id=PAD)
    assert finite
    return loss, [b - p.detach() for b, p in zip(before, model.parameters())]


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("extra", [(0, 0, 0), (3, 5, 4)])
@pytest.mark.parametrize("clip", [0.0, 0.05])
def test_static_update_equals_the_eager_step(pre_norm, extra, clip):
    cfg = TrainConfig(clip=clip, label_smoothing=0.1)
    batch, model = toy_batch(), toy_model(pre_norm)
    static_model = copy.deepcopy(model)
    loss, grads = eager_gradients(model, batch, cfg)
    rows, src_len, tgt_len = (len(batch) + extra[0], batch.src_ids.shape[1] + extra[1],
                              batch.tgt_in.shape[1] + extra[2])
    padded = pad_batch(batch, rows, src_len, tgt_len, pad_id=PAD)
    tokens = torch.tensor(float(batch.num_tgt_tokens), dtype=torch.float64)
    static_loss, finite, grad_norm = static_update(static_model, padded, tokens, train_cfg=cfg, use_amp=False,
                                                   pad_id=PAD)
    assert bool(finite) and float(grad_norm) > 0
    # sequence_loss takes the softmax in float32 (a padded batch sums more, ignored, terms), so
    # both agree to float32 rounding; a wrong mask or normaliser would differ by far more
    torch.testing.assert_close(static_loss.double(), loss, rtol=1e-6, atol=1e-9)  # the eager step sums in float64
    for (name, p), expected in zip(static_model.named_parameters(), grads):
        torch.testing.assert_close(p.grad, expected, rtol=1e-5, atol=1e-9, msg=name)


def test_static_update_flags_a_non_finite_step():
    cfg = TrainConfig()
    batch, model = toy_batch(), toy_model()
    with torch.no_grad():
        model.generator.weight[5, 0] = float("nan")
    _, finite, _ = static_update(model, batch, torch.tensor(float(batch.num_tgt_tokens), dtype=torch.float64),
                                 train_cfg=cfg, use_amp=False, pad_id=PAD)
    assert not bool(finite)


def test_pad_batch_adds_only_padding_and_target_free_filler_rows():
    batch = toy_batch()
    padded = pad_batch(batch, 9, 12, 10, pad_id=PAD)
    assert padded.src_ids.shape == padded.src_mask.shape == (9, 12)
    assert padded.tgt_in.shape == padded.tgt_out.shape == padded.tgt_mask.shape == (9, 10)
    n, s, t = len(batch), batch.src_ids.shape[1], batch.tgt_in.shape[1]
    assert torch.equal(padded.src_ids[:n, :s], batch.src_ids) and torch.equal(padded.tgt_out[:n, :t], batch.tgt_out)
    assert int(padded.src_mask.sum()) == int(batch.src_mask.sum()) + 3  # one token per filler row
    assert int(padded.tgt_mask.sum()) == padded.num_tgt_tokens == batch.num_tgt_tokens
    assert (padded.tgt_out[n:] == PAD).all() and (padded.src_lengths[n:] == 1).all()
    assert padded.index.tolist()[n:] == [-1, -1, -1]
    with pytest.raises(ValueError, match=r"cannot pad a batch of shape \(batch=6"):
        pad_batch(batch, 5, 12, 10, pad_id=PAD)


def test_bucket_shape_rounds_up():
    batch = toy_batch()  # 6 rows
    rows, src_len, tgt_len = bucket_shape(batch, length_step=8, row_step=8)
    assert rows == 8 and src_len % 8 == 0 and tgt_len % 8 == 0
    assert src_len >= batch.src_ids.shape[1] and src_len - batch.src_ids.shape[1] < 8
    assert bucket_shape(batch, length_step=1, row_step=1) == (6, batch.src_ids.shape[1], batch.tgt_in.shape[1])
    with pytest.raises(ValueError, match="length_step=0"):
        bucket_shape(batch, length_step=0, row_step=8)


def test_mode_none_is_the_eager_step_and_cudagraphs_needs_cuda():
    cfg = TrainConfig(clip=1.0)
    batch, model = toy_batch(), toy_model()
    twin = copy.deepcopy(model)
    opt_a, opt_b = torch.optim.Adam(model.parameters(), lr=1e-3), torch.optim.Adam(twin.parameters(), lr=1e-3)
    step = make_train_step("none", model, opt_a, make_step_schedule(opt_a, cfg), train_cfg=cfg, use_amp=False,
                           pad_id=PAD, eager=train_step)
    loss_a, _ = step(batch)
    loss_b, _ = train_step(twin, batch, opt_b, make_step_schedule(opt_b, cfg), train_cfg=cfg, use_amp=False,
                           pad_id=PAD)
    assert torch.equal(loss_a, loss_b)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), twin.parameters()))
    with pytest.raises(ValueError, match="must be one of none, default, cudagraphs"):
        make_train_step("fast", model, opt_a, None, train_cfg=cfg, use_amp=False, pad_id=PAD, eager=train_step)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        make_train_step("cudagraphs", model, opt_a, None, train_cfg=cfg, use_amp=False, pad_id=PAD,
                        eager=train_step)


@pytest.mark.parametrize(("overrides", "message"), [
    (["train.compile=fast"], r"train.compile='fast' is not one of 'none', 'default', 'cudagraphs'"),
    (["train.compile=cudagraphs"], r"train.compile='cudagraphs' needs model.arch='transformer'"),
    (["train.compile=cudagraphs", "model.arch=transformer", "train.device=cpu"], r"train.device='cpu'"),
])
def test_compile_key_is_validated(tmp_path, overrides, message):
    from attnmt.config import load_config
    from attnmt.errors import ConfigError

    path = tmp_path / "cfg.yaml"
    path.write_text("model:\n  arch: rnn\n")
    with pytest.raises(ConfigError, match=message):
        load_config(path, overrides)
    cfg = load_config(path, ["train.compile=cudagraphs", "model.arch=transformer"])
    assert cfg.train.compile == "cudagraphs"
    assert load_config(path).train.compile == "none"
