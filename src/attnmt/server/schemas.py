"""Pydantic models for every request and response of the service.

LibreTranslate's shapes (`/translate`, `/languages`, `{"error": ...}`) are copied field for field
so that its clients work unchanged; attnmt's own `/v1` API adds tokens, scores and attention.
Unknown fields are refused (extra="forbid"), so a typo is an error, not a silent default.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from attnmt.bounds import BEAM, LENGTH_PENALTY


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorResponse(BaseModel):
    """Every error, as LibreTranslate writes it."""

    error: str = Field(..., examples=["fr is not supported: this model translates de -> en"])


# ---- LibreTranslate-compatible ----------------------------------------------------------------

class LibreTranslateRequest(_Strict):
    """POST /translate, as a JSON or a form body (fields checked in LibreTranslate's order)."""

    q: Optional[Union[str, list[str]]] = Field(None, description="text, or a list of texts")
    source: Optional[str] = Field(None, description="source language code, or 'auto'", examples=["de"])
    target: Optional[str] = Field(None, description="target language code", examples=["en"])
    format: Optional[str] = Field("text", description="'text', or 'html' (the markup is kept; no alternatives)")
    alternatives: Optional[int] = Field(0, description="how many alternative translations to add")
    api_key: Optional[str] = Field(None, description="needed when the server runs with --api-key")

    @field_validator("alternatives", mode="before")
    @classmethod
    def _count(cls, value):
        """An integer, as a number or as digits (a form sends text; LibreTranslate reads both), never a bool."""
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,18}", value):
            return int(value)
        raise ValueError("not a number")


def libretranslate_body_schema(*, form: bool, max_alternatives: int) -> dict:
    """The documented body of POST /translate: what the route accepts, as JSON or as a form (whose
    fields are text: no null, and a repeated q for a list)."""
    def text(description: str, nullable: bool = False) -> dict:
        return ({"anyOf": [{"type": "string"}, {"type": "null"}], "description": description} if nullable and not form
                else {"type": "string", "description": description})

    count = {"type": "integer", "minimum": 0, "maximum": max_alternatives}
    alternatives = (count if form else
                    {"anyOf": [count, {"type": "string", "pattern": "^([0-9]|1[0-5])$"}, {"type": "null"}]})
    formats = {"type": "string", "enum": ["text", "html"]}
    return {"type": "object", "additionalProperties": False, "required": ["q", "source", "target"], "properties": {
        "q": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
              "description": "text, or a list of texts" + (" (repeat the field)" if form else "")},
        "source": text("source language code, or 'auto'"),
        "target": text("target language code"),
        "format": (formats if form else {"anyOf": [formats, {"type": "null"}]}) | {
            "default": "text", "description": "'text', or 'html' (the markup is kept; no alternatives)"},
        "alternatives": alternatives | {"default": 0, "description": "how many alternative translations to add"},
        "api_key": text("needed when the server runs with --api-key", nullable=True)}}


class DetectedLanguage(BaseModel):
    confidence: float = Field(..., description="percent", examples=[98.4])
    language: str = Field(..., examples=["de"])


class DetectRequest(_Strict):
    """POST /detect, as a JSON or a form body."""

    q: Optional[str] = Field(None, description="the text whose language to find")
    api_key: Optional[str] = Field(None, description="needed when the server runs with --api-key")


class SuggestRequest(_Strict):
    """POST /suggest: a better translation `s` of `q`, as a JSON or a form body."""

    q: Optional[str] = Field(None, description="the source text")
    s: Optional[str] = Field(None, description="the suggested translation")
    source: Optional[str] = Field(None, description="source language code")
    target: Optional[str] = Field(None, description="target language code")
    api_key: Optional[str] = Field(None, description="needed when the server runs with --api-key")


class SuggestResponse(BaseModel):
    success: bool


class FrontendLanguage(BaseModel):
    code: str
    name: str


class FrontendLanguages(BaseModel):
    source: FrontendLanguage
    target: FrontendLanguage


class FrontendSettings(BaseModel):
    """GET /frontend/settings, LibreTranslate's field names."""

    charLimit: int = Field(..., description="-1: no character limit (inputs are cut by tokens instead)")
    frontendTimeout: int = Field(..., description="milliseconds the page waits after typing before translating")
    apiKeys: bool = Field(..., description="whether the server uses an API key")
    keyRequired: bool = Field(..., description="whether requests need it")
    suggestions: bool = Field(..., description="whether POST /suggest is on (--suggestions FILE)")
    filesTranslation: bool = Field(..., description="whether POST /translate_file is on")
    supportedFilesFormat: list[str]
    language: FrontendLanguages


def text_fields_body_doc(fields: dict[str, str], required: list[str]) -> dict:
    """The documented body of an endpoint whose fields are all text (JSON, urlencoded or multipart);
    `api_key` may also be null in JSON."""
    def schema(form: bool) -> dict:
        properties = {name: {"type": "string", "description": text} for name, text in fields.items()}
        if not form and "api_key" in properties:
            properties["api_key"] = {"anyOf": [{"type": "string"}, {"type": "null"}],
                                     "description": fields["api_key"]}
        return {"type": "object", "additionalProperties": False, "required": required, "properties": properties}

    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": schema(False)},
        "application/x-www-form-urlencoded": {"schema": schema(True)},
        "multipart/form-data": {"schema": schema(True)}}}}


class LibreTranslateResponse(BaseModel):
    translatedText: Union[str, list[str]]
    alternatives: Optional[Union[list[str], list[list[str]]]] = None
    detectedLanguage: Optional[Union[DetectedLanguage, list[DetectedLanguage]]] = None
    warnings: Optional[Union[list[str], list[list[str]]]] = Field(
        None, description="attnmt's addition: present when an input was cut")
    confidence: Optional[Union[float, list[Optional[float]]]] = Field(
        None, description="attnmt's addition: how likely each translation is to be good, in [0, 1] (see /v1/translate)")
    alternativeConfidence: Optional[Union[list[Optional[float]], list[list[Optional[float]]]]] = Field(
        None, description="attnmt's addition: the confidence of each alternative, in the order of `alternatives`")
    pivot: Optional[Union[str, list[Optional[str]]]] = Field(
        None, description="attnmt's addition: the language a text was translated through, when no model has its "
                          "direction; for a list q, one entry per text (null: translated directly)")


class TranslateFileResponse(BaseModel):
    """POST /translate_file: where to download the translation (until it expires)."""

    translatedFileUrl: str = Field(..., description="absolute URL of GET /download_file/<name>")
    warnings: Optional[list[str]] = Field(
        None, description="attnmt's addition: present when a paragraph was cut (search.max_input_tokens), each "
                          "warning once")


class Language(BaseModel):
    code: str = Field(..., examples=["de"])
    name: str = Field(..., examples=["German"])
    targets: list[str] = Field(..., examples=[["en"]])


# ---- health ---------------------------------------------------------------------------------

class HealthResponse(BaseModel):
    status: str = Field(..., examples=["ok"])
    model: str = Field(..., description="the runs' names, comma-separated (one per model)")
    queued: int = Field(..., description="sentences waiting for a batch")
    running: int = Field(..., description="sentences in the model now")
    in_flight: int = Field(..., description="translation requests not yet answered")
    batches: int = Field(..., description="model calls so far")
    sentences: int = Field(..., description="sentences translated so far")
    largest_batch: int = Field(..., description="most sentences in one model call")
    failed_batches: int = Field(..., description="model calls that raised")


# ---- attnmt's own API -----------------------------------------------------------------------

class V1TranslateRequest(_Strict):
    """POST /v1/translate: types as the schema says (strict: 0 is not false, "5" is not 5)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    texts: list[str] = Field(..., description="texts to translate (at most --max-texts)",
                             examples=[["Ein Hund läuft durch den Schnee ."]])
    beam_size: Optional[int] = Field(None, ge=BEAM.low, le=BEAM.high, description="1 = greedy; default: the server's")
    n_best: int = Field(1, ge=BEAM.low, le=BEAM.high, description="alternatives per text (at most beam_size)")
    length_penalty: Optional[float] = Field(None, ge=LENGTH_PENALTY.low, le=LENGTH_PENALTY.high,
                                            description="default: the run's")
    attention: bool = Field(False, description="return the attention of each translation (and alternative): its "
                            "matrix, and a paragraph's per-sentence blocks; at most 1,000,000 weights an answer")
    layer: Optional[int] = Field(None, description="Transformer: decoder layer (default: the mean)")
    head: Optional[int] = Field(None, description="Transformer: head (default: the mean)")
    alignments: bool = Field(False, description="return the word alignment of each translation and alternative")
    min_confidence: Optional[float] = Field(None, ge=0.0, le=1.0, description=(
        "a translation less confident than this is not given: its text is the source (or empty: below_confidence), "
        "with a warning; default: the server's --min-confidence, else none"))
    below_confidence: Literal["source", "empty"] = Field("source", description="what a withheld translation's text is")
    target_prefix: Optional[list[Optional[str]]] = Field(
        None, description="one text (or null) per text: the translation starts with it, the model completes it",
        examples=[["A dog"]])
    glossary: Optional[list[Annotated[list[str], Field(min_length=2, max_length=2)]]] = Field(
        None, max_length=64, description="terminology: [source phrase, target phrase] pairs; where a source "
        "phrase occurs in a text, its translation contains the target phrase exactly once (native engine; "
        "greedy or beam)", examples=[[["Hund", "hound"]]])
    source: Optional[str] = Field(None, description="source language (with target: picks the model; "
                                                    "default: the server's first model)")
    target: Optional[str] = Field(None, description="target language (with source)")
    api_key: Optional[str] = Field(None, description="needed when the server runs with --api-key")


ALIGNMENT_DOC = ("[source word, output word] links (word indices; pieces merged into words), one per output "
                 "word, from attention; null unless asked")
TOKEN_PROBS_DOC = ("each output token's probability, then <eos>'s when the search produced it (not when the "
                   "output budget cut it); forced target_prefix tokens count 1; their logs sum to the "
                   "hypothesis' log-probability (as /v1/score gives it). null with the CTranslate2 engine, "
                   "whose search does not return them: score the output with /v1/score")


class V1AttentionBlock(BaseModel):
    """One sentence's attention inside its text's: its output tokens x its source tokens."""

    row: int = Field(..., description="the sentence's first output token (a row of the text's matrix)")
    col: int = Field(..., description="the sentence's first source token (a column of the text's matrix)")
    weights: list[list[float]] = Field(..., description="its output tokens' rows x its source tokens' columns")


BLOCKS_DOC = ("a text of several sentences: each sentence's attention block (its output tokens attend only to "
              "its own source tokens; every weight outside the blocks is 0), linear in the sentences; null for "
              "one sentence (`attention` is its block) and when attention is not asked or left out (warnings)")
MATRIX_DOC = ("len(tokens) rows x len(source_tokens) columns; each row sums to 1. null when not asked "
              "(attention: false, the default), for a paragraph past 40,000 weights (see attention_blocks) and "
              "past the answer's 1,000,000 (said in warnings)")


class V1Alternative(BaseModel):
    text: str
    tokens: list[str]
    score: float
    attention: Optional[list[list[float]]] = Field(None, description=MATRIX_DOC)
    attention_blocks: Optional[list[V1AttentionBlock]] = Field(None, description=BLOCKS_DOC)
    replaced: list[int] = Field(default_factory=list, description="positions in tokens whose <unk> was replaced")
    alignment: Optional[list[list[int]]] = Field(None, description=ALIGNMENT_DOC)
    token_log_probs: Optional[list[float]] = Field(None, description="log of token_probs")
    token_probs: Optional[list[float]] = Field(None, description=TOKEN_PROBS_DOC)
    confidence: Optional[float] = Field(None, description="how likely this alternative is to be good (as the "
                                                          "translation's confidence)")


COVERAGE_DOC = ("the lowest of the sentences' coverage: per sentence, the mean over its source words of "
                "min(1, the attention the word received over the output); null without attention")


class V1Sentence(BaseModel):
    """One sentence of a text (the service splits every text into sentences) and its coverage."""

    source: list[int] = Field(..., description="[start, end) characters of the sentence in the text")
    target: list[int] = Field(..., description="[start, end) characters of its translation in `text`")
    coverage: Optional[float] = Field(None, description="mean over its source words of min(1, attention received)")
    length_ratio: float = Field(..., description="output tokens / source tokens")
    uncovered: list[int] = Field(default_factory=list,
                                 description="source words (indices as in `alignment`) that received almost no attention")
    flagged: bool = Field(False, description="a source word uncovered, or the output far shorter than the input")


CONFIDENCE_DOC = ("how likely the translation is to be good, in [0, 1] (decoding/confidence.py): calibrated, the "
                  "share of such translations of the model's validation set whose sentence chrF reached the "
                  "model's median; a text of several sentences: its least confident sentence's")


class V1Translation(BaseModel):
    text: str = Field(..., description="the detokenized translation")
    tokens: list[str] = Field(..., description="output tokens (words or subwords), without <eos>")
    source_tokens: list[str] = Field(..., description="the tokenized (and possibly cut) input")
    score: float = Field(..., description="model score (length-normalized for beams)")
    attention: Optional[list[list[float]]] = Field(None, description=MATRIX_DOC)
    attention_blocks: Optional[list[V1AttentionBlock]] = Field(None, description=BLOCKS_DOC)
    alternatives: list[V1Alternative] = Field(..., description="n-best, best first (incl. the translation)")
    warnings: list[str] = Field(..., description="e.g. the input was cut, the attention left out")
    replaced: list[int] = Field(default_factory=list,
                                description="positions in tokens whose <unk> became the most attended source word")
    alignment: Optional[list[list[int]]] = Field(None, description=ALIGNMENT_DOC)
    token_log_probs: Optional[list[float]] = Field(None, description="log of token_probs")
    token_probs: Optional[list[float]] = Field(None, description=TOKEN_PROBS_DOC)
    coverage: Optional[float] = Field(None, description=COVERAGE_DOC)
    flagged: bool = Field(False, description="some source may be missing from the translation: a sentence is flagged")
    uncovered: list[int] = Field(default_factory=list,
                                 description="source words (indices as in `alignment`) that received almost no attention")
    sentences: list[V1Sentence] = Field(default_factory=list,
                                        description="the text's sentences in order, each with its coverage")
    confidence: Optional[float] = Field(None, description=CONFIDENCE_DOC)
    confidence_calibrated: bool = Field(False, description="the model has a calibration (attnmt calibrate); "
                                                           "false: confidence is the mean token probability")
    withheld: bool = Field(False, description="below min_confidence: `text` is the source (or empty)")
    read_as: Optional[str] = Field(None, description="the text as the model read it, where it was mended: case "
                                                     "restored, slips of the finger corrected, a missing final mark "
                                                     "written (search.restore_case, search.correct_spelling, "
                                                     "search.complete_final_mark); null: read as typed")
    from_phrases: bool = Field(False, description="an input of one to three words translated by the phrase table "
                                                  "of the model's training pairs (search.short_phrases), not by "
                                                  "the model's search; its scores are the model's for that text")


class V1TranslateResponse(BaseModel):
    translations: list[V1Translation]
    beam_size: int
    layer: Optional[int] = None
    head: Optional[int] = None


class V1ScoreRequest(_Strict):
    """POST /v1/score: forced decoding of given translations (strict types, as /v1/translate)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    texts: list[str] = Field(..., description="source texts (at most --max-texts)",
                             examples=[["Ein Hund läuft durch den Schnee ."]])
    translations: list[str] = Field(..., description="one translation per text, to score",
                                    examples=[["A dog runs through the snow ."]])
    attention: bool = Field(True, description="return the attention matrix of each translation")
    source: Optional[str] = Field(None, description="source language (with target: picks the model)")
    target: Optional[str] = Field(None, description="target language (with source)")
    api_key: Optional[str] = Field(None, description="needed when the server runs with --api-key")


class V1Score(BaseModel):
    source_tokens: list[str] = Field(..., description="the tokenized (and possibly cut) source")
    tokens: list[str] = Field(..., description="the tokenized (and possibly cut) translation, without <eos>")
    log_prob: Optional[float] = Field(..., description="sum of the token log-probabilities, <eos> included; "
                                                       "null for an empty source")
    normalized: Optional[float] = Field(..., description="log_prob per scored token (comparable with the "
                                                         "score of a beam without length penalty)")
    num_tokens: int = Field(..., description="tokens scored: len(tokens) + 1 for <eos>")
    token_log_probs: list[float] = Field(..., description="one per scored token, <eos> last")
    token_probs: list[float] = Field(..., description="exp(token_log_probs)")
    attention: Optional[list[list[float]]] = Field(
        None, description="num_tokens rows (<eos> last) x len(source_tokens) columns; null when not asked, "
                          "for an empty source, and with the CTranslate2 engine (it gives no attention)")
    warnings: list[str] = Field(..., description="e.g. a text was cut")


class V1ScoreResponse(BaseModel):
    scores: list[V1Score]


class V1Model(BaseModel):
    name: str = Field(..., description="the run directory's name")
    arch: str = Field(..., examples=["rnn", "transformer"])
    source_lang: str
    target_lang: str
    directions: list[str] = Field(default_factory=list, description="every direction of the model that serves "
                                  "this one (a multilingual model has several), as SRC-TGT")
    tokenizer: str
    parameters: int
    src_vocab_size: int
    tgt_vocab_size: int
    layers: Optional[int] = Field(None, description="Transformer: decoder layers")
    heads: Optional[int] = Field(None, description="Transformer: attention heads")
    beam_size: int = Field(..., description="the server's default beam")
    max_beam: int = BEAM.high
    max_texts: int
    max_input_tokens: int
    best_valid_bleu: Optional[float] = Field(None, description="validation BLEU of the best checkpoint")
    best_epoch: Optional[int] = None
    test_scores: dict[str, dict] = Field(default_factory=dict,
                                         description="attnmt evaluate reports found in the run, by file")
    api_key_required: bool
