"""The models one server holds, one per language pair, and the routing of a request to one.

    models = ModelSet([service_de_en, service_en_de])
    models.route("de", "en")        # the de -> en TranslationService
    models.route("fr", "en")        # ApiError(400, "fr is not supported: this server translates de -> en, en -> de")

Each model has its own TranslationService (its own micro-batcher and worker thread), so a
request's sentences only ever meet sentences of the same pair in a batch.
"""

from __future__ import annotations

from typing import Sequence

from attnmt.errors import AttnmtError
from attnmt.server.errors import ApiError
from attnmt.server.ratelimit import check_rate
from attnmt.server.service import TranslationService, language_name


class ModelSet:
    """Several TranslationServices, at most one per (source, target) pair; the first is the default
    of the routes that name no pair (/v1/model, and /v1/translate without source and target)."""

    def __init__(self, services: Sequence[TranslationService]):
        if not services:
            raise AttnmtError("the server needs at least one model")
        self.services = list(services)
        self.by_pair: dict[tuple[str, str], TranslationService] = {}
        for service in self.services:
            key = (service.source_lang, service.target_lang)
            if key in self.by_pair:
                raise AttnmtError(f"{self.by_pair[key].name} and {service.name} both translate {service.pair}: "
                                  f"serve one model per pair (join runs with '+' to serve them as one ensemble)")
            self.by_pair[key] = service

    @property
    def default(self) -> TranslationService:
        return self.services[0]

    @property
    def sources(self) -> list[str]:
        """The languages the server translates from, in the order the models were given."""
        return list(dict.fromkeys(s.source_lang for s in self.services))

    def sources_into(self, target: str) -> list[str]:
        """The languages the server translates into `target` from."""
        return [s.source_lang for s in self.services if s.target_lang == target]

    def describe_pairs(self) -> str:
        """'this model translates de -> en' or 'this server translates de -> en, en -> de'."""
        pairs = ", ".join(s.pair for s in self.services)
        return f"this {'model' if len(self.services) == 1 else 'server'} translates {pairs}"

    def route(self, source: str, target: str) -> TranslationService:
        """The model for source -> target; 400 naming the pairs the server has when none does."""
        service = self.by_pair.get((source, target))
        if service is not None:
            return service
        if source not in self.sources:
            raise ApiError(400, f"{source} is not supported: {self.describe_pairs()}")
        if target not in {s.target_lang for s in self.services}:
            raise ApiError(400, f"{target} is not supported: {self.describe_pairs()}")
        raise ApiError(400, f"{source} -> {target} is not supported: {self.describe_pairs()}")

    def languages(self) -> list[dict]:
        """LibreTranslate's /languages: every language the server reads or writes, each with the
        targets it translates into (sources first, in model order; then languages only written)."""
        codes = list(dict.fromkeys([s.source_lang for s in self.services] + [s.target_lang for s in self.services]))
        return [dict(code=code, name=language_name(code),
                     targets=[s.target_lang for s in self.services if s.source_lang == code]) for code in codes]

    def check_api_key(self, given: str | None) -> None:
        self.default.check_api_key(given)  # one key for the whole server (the settings are shared)

    def check_access(self, request, given: str | None) -> None:
        """403 for a wrong key, then 429 when the client (or the key) is over --req-limit."""
        self.check_api_key(given)
        check_rate(request, given if self.default.settings.api_key is not None else None)

    def check_texts(self, texts: Sequence[str]) -> None:
        self.default.check_texts(texts)
