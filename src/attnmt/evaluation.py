"""Scores: sacreBLEU BLEU and chrF on detokenized cased text, the tutorials' lowercased
tokenized BLEU, perplexity and the teacher-forced corpus loss it comes from.

The headline is sacreBLEU's corpus BLEU with its default 13a tokenizer on detokenized, cased
output, printed with its signature so that numbers can be compared across papers and toolkits.
`bleu_lc_tok` (lowercased, Moses-tokenized, no further tokenization) is what the classic
PyTorch/torchtext tutorials report; it is given only for comparison with them.
"""

from __future__ import annotations

import logging
import math

import torch
import torch.nn.functional as F
from torch import nn

from attnmt.data.batching import Batch
from attnmt.models import eval_mode
from attnmt.models.loss import sequence_loss

log = logging.getLogger(__name__)


def score_translations(hyps: list[str], refs: list[str], *, tgt_lang: str = "en") -> dict:
    """Corpus-level scores of detokenized hypotheses against one reference each.

    Returns:
        dict with bleu, chrf (cased, detokenized, sacreBLEU 13a / chrF2), bleu_lc (lowercased,
        13a), bleu_lc_tok (lowercased, Moses-tokenized, tokenize=none: the tutorials' number),
        and the sacreBLEU signatures.
    """
    from sacrebleu.metrics import BLEU, CHRF
    from sacremoses import MosesTokenizer

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    bleu, chrf, bleu_lc = BLEU(), CHRF(), BLEU(lowercase=True)
    moses = MosesTokenizer(lang=tgt_lang)

    def tok(text: str) -> str:
        return moses.tokenize(text.lower(), escape=False, return_str=True)

    bleu_tok = BLEU(tokenize="none", force=True)
    result_bleu = bleu.corpus_score(hyps, [refs])
    return {
        "bleu": round(result_bleu.score, 2),
        "chrf": round(chrf.corpus_score(hyps, [refs]).score, 2),
        "bleu_lc": round(bleu_lc.corpus_score(hyps, [refs]).score, 2),
        "bleu_lc_tok": round(bleu_tok.corpus_score([tok(h) for h in hyps], [[tok(r) for r in refs]]).score, 2),
        "bleu_details": str(result_bleu),
        "signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def perplexity(total_nll: float, total_tokens: int) -> float:
    """exp(mean negative log-likelihood per target token); inf when there are no tokens."""
    if total_tokens == 0:
        return float("inf")
    return math.exp(min(total_nll / total_tokens, 700.0))


@torch.inference_mode()
def corpus_loss(model: nn.Module, batches: list[Batch], device: torch.device, *, pad_id: int,
                forced_first: bool = False) -> tuple[float, int]:
    """Teacher-forced summed NLL and number of target tokens over `batches` (eval mode); with
    `forced_first`, less each target's first token (a forced language token, which no search
    scores): its loss, and one token a target."""
    total, tokens = torch.zeros((), dtype=torch.float64, device=device), 0
    with eval_mode(model):
        for batch in batches:
            batch = batch.to(device)
            logits = model(batch.src_ids, batch.src_mask, batch.src_lengths, batch.tgt_in).logits
            total += sequence_loss(logits, batch.tgt_out, pad_id=pad_id).double()
            tokens += batch.num_tgt_tokens
    if not forced_first:
        return float(total), tokens
    return float(total) - _first_token_loss(model, batches, device), tokens - sum(len(b) for b in batches)


@torch.inference_mode()
def _first_token_loss(model: nn.Module, batches: list[Batch], device: torch.device) -> float:
    """Teacher-forced summed NLL of each target's first token alone (eval mode)."""
    total = 0.0
    with eval_mode(model):
        for batch in batches:
            batch = batch.to(device)
            logits = model(batch.src_ids, batch.src_mask, batch.src_lengths, batch.tgt_in[:, :1]).logits
            total += float(F.cross_entropy(logits[:, 0].float(), batch.tgt_out[:, 0], reduction="sum"))
    return total
