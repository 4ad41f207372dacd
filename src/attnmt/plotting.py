"""Pictures: attention heatmaps (source words x output words) and learning curves."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Sequence

log = logging.getLogger(__name__)


def plot_attention(weights, src_tokens: Sequence[str], tgt_tokens: Sequence[str], path: str | Path,
                   *, title: str | None = None) -> Path:
    """Draw a labelled heatmap of attention weights.

    Args:
        weights: array-like (tgt_len, src_len): row i is how output token i spread its attention.
        src_tokens: src_len labels for the x axis.
        tgt_tokens: tgt_len labels for the y axis.
        path: output image file (.png, .pdf, .svg).

    Raises:
        ValueError: the weights' shape does not match the token lists.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    matrix = np.asarray(weights, dtype=float)
    if matrix.shape != (len(tgt_tokens), len(src_tokens)):
        raise ValueError(f"weights have shape {matrix.shape}, expected (tgt_len={len(tgt_tokens)}, "
                         f"src_len={len(src_tokens)})")
    width = max(4.0, 0.45 * len(src_tokens) + 2.0)
    height = max(3.0, 0.4 * len(tgt_tokens) + 1.5)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=max(1e-9, float(matrix.max(initial=0.0))),
                      aspect="auto")
    ax.set_xticks(range(len(src_tokens)))
    ax.set_xticklabels(src_tokens, rotation=60, ha="right")
    ax.set_yticks(range(len(tgt_tokens)))
    ax.set_yticklabels(tgt_tokens)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_learning_curves(metrics_file: str | Path, path: str | Path) -> Path:
    """Plot validation loss and BLEU per epoch from a run's metrics.jsonl."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in Path(metrics_file).read_text().splitlines() if line.strip()]
    epochs = [r for r in rows if r.get("event") == "epoch"]
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax_loss.plot([r["epoch"] for r in epochs], [r["val_loss"] for r in epochs], marker="o")
    ax_loss.set_xlabel("epoch")
    ax_loss.set_ylabel("validation loss")
    ax_bleu.plot([r["epoch"] for r in epochs], [r["val_bleu"] for r in epochs], marker="o", color="C1")
    ax_bleu.set_xlabel("epoch")
    ax_bleu.set_ylabel("validation BLEU")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def attention_command(args) -> int:
    """`attnmt attention RUN_DIR "sentence" -o heatmap.png`."""
    from attnmt.translator import Translator

    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, engine=args.engine)
    result = translator.translate([args.sentence], beam_size=args.beam, layer=args.layer, head=args.head)[0]
    if not result.source_tokens:
        from attnmt.errors import AttnmtError

        raise AttnmtError("the sentence is empty: nothing to attend to")
    out = plot_attention(result.attention, result.source_tokens, result.tokens, args.output, title=result.text)
    print(result.text)
    print(f"wrote {out}")
    return 0
