"""Training: one loop for every model, on one process or N ranks under torchrun.

    loop.py           `train(cfg, run_dir)`: the Trainer, epoch by epoch (validation, early
                      stopping, time budget, checkpoints, logs)
    state.py          the typed training state, the metrics log, save / restore for --resume
    step.py           one update: loss and gradients, clipping, optimizer and schedule step
    compiled_step.py  the same step for `train.compile`: torch.compile, or CUDA graphs
    data.py           corpora, the text pipeline and each epoch's updates (sharded per rank)
    trainable.py      the model, its optimizer and schedules
    distributed.py    the torchrun process group and agreement between ranks
"""

from attnmt.training.loop import TrainResult, train

__all__ = ["TrainResult", "train"]
