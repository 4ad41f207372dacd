"""Language identification for POST /detect and `source: "auto"`, restricted to the languages the
server translates from: by the served models' own source words where each of those languages has
them (their lexicons, data/lexicon.py's Lexicons.ranked: how the library reads a multilingual call
that names no source), else by py3langid (Lui and Baldwin's langid.py, a naive Bayes over byte
n-grams; its model ships inside the wheel).

    detector = LanguageDetector(["de", "en"], lexicons)  # lexicons: a Lexicons, or None
    detector.detect("Zwei Hunde spielen im Schnee .")   # [{"confidence": 99.9, "language": "de"}, ...]

Why the lexicons first: on Multi30k's test captions in de, fr, cs and en typed in lower case, in
capitals or without accents, the lexicons of a model trained on Multi30k name 97.7% of them right by
their first word alone, py3langid 49-60% (docs/results.md, "What people type"); a text none of them
knows a word of goes to py3langid.

Why py3langid rather than lingua: on Multi30k's test sentences (de, fr, cs, en; restricted to those
four) both are right on every sentence; on their first three words py3langid is right more often
(99.3% against 98.0%), and it holds half the memory (process RSS 131 against 237 MiB); see
docs/serving.md for the figures and the command.
"""

from __future__ import annotations

import logging
from typing import Sequence

from attnmt.data.lexicon import Lexicons

log = logging.getLogger(__name__)

CONFIDENCE_DIGITS = 1  # LibreTranslate gives confidence in percent, e.g. 98.4


def source_lexicons(services) -> Lexicons | None:
    """Each served source language's lexicon, of the first service that reads it and keeps one
    (Translator.lexicon_for); None when none does."""
    found = {}
    for service in services:
        if service.source_lang not in found:
            lexicon = service.translator.lexicon_for(service.source_lang)
            if lexicon is not None:
                found[service.source_lang] = lexicon
    return Lexicons(found) if found else None


class LanguageDetector:
    """The served models' lexicons, else py3langid over `languages` (those it knows; a language it
    does not know and no lexicon covers is named in the log and never guessed)."""

    def __init__(self, languages: Sequence[str], lexicons: Lexicons | None = None):
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        known = set(identifier.nb_classes)
        self.sources = list(dict.fromkeys(languages))
        self.languages = [code for code in self.sources if code in known]  # py3langid's
        unknown = [code for code in self.sources if code not in known and (lexicons is None or not lexicons.of(code))]
        if unknown:
            log.warning("language identification cannot recognize %s: name them as source", ", ".join(unknown))
        if self.languages:
            identifier.set_languages(self.languages)
        self._identifier = identifier
        self.lexicons = lexicons

    def detect(self, text: str, among: Sequence[str] | None = None) -> list[dict]:
        """{confidence (percent), language} for each of `among` (default: every language of the
        detector) that it knows, most likely first; the confidences sum to about 100. By the
        lexicons where each of those languages has one and they know a word of `text`, else by
        py3langid. Empty or blank text gives every candidate confidence 0 (nothing to tell them apart)."""
        wanted = list(among) if among is not None else self.sources
        if self.lexicons is not None and len(wanted) > 1 and all(self.lexicons.of(code) for code in wanted):
            ranked = self.lexicons.ranked(text, wanted)
            if ranked:
                return [{"confidence": round(100.0 * p, CONFIDENCE_DIGITS), "language": code} for code, p in ranked]
        candidates = [code for code in wanted if code in self.languages]
        if not candidates:
            return []
        if not text.strip() or len(self.languages) == 1:
            share = 0.0 if not text.strip() else 100.0
            return [{"confidence": share, "language": code} for code in candidates]
        probability = dict(self._identifier.rank(text))
        total = sum(probability[code] for code in candidates) or 1.0
        ranked = sorted(candidates, key=lambda code: -probability[code])
        return [{"confidence": round(100.0 * probability[code] / total, CONFIDENCE_DIGITS), "language": code}
                for code in ranked]
