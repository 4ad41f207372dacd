"""Scores: sacreBLEU BLEU and chrF on detokenized cased text, the tutorials' lowercased
tokenized BLEU, and perplexity.

The headline is sacreBLEU's corpus BLEU with its default 13a tokenizer on detokenized, cased
output, printed with its signature so that numbers can be compared across papers and toolkits.
`bleu_lc_tok` (lowercased, Moses-tokenized, no further tokenization) is what the classic
PyTorch/torchtext tutorials report; it is given only for comparison with them.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

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


def evaluate_command(args) -> int:
    """`attnmt evaluate RUN_DIR [--split S] [--beam K]`: print scores as JSON."""
    from attnmt.translator import Translator

    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device)
    start = time.perf_counter()
    report = translator.evaluate(args.split, beam_size=args.beam, length_penalty=args.length_penalty,
                                 batch_size=args.batch_size)
    report["seconds"] = round(time.perf_counter() - start, 2)
    report["checkpoint"] = args.checkpoint
    print(json.dumps(report, indent=2, ensure_ascii=False))
    suffix = "" if args.checkpoint == "best" else "_" + Path(args.checkpoint).stem
    if args.length_penalty is not None:
        suffix += f"_lp{args.length_penalty:g}"
    out = Path(args.run_dir) / f"eval_{args.split}_beam{args.beam}{suffix}.json"
    try:
        from attnmt.checkpoint import write_json

        write_json(out, report)
    except OSError as err:  # a read-only run directory still gets its scores printed
        log.warning("could not write %s: %s", out, err)
    return 0
