"""Pictures: attention heatmaps (source words x output words)."""

from __future__ import annotations

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
