"""The models one server holds, one service per direction, and the routing of a request to one.

    models = ModelSet([service_de_en, service_en_de])
    models.route("de", "en")        # the de -> en TranslationService
    models.route("fr", "en")        # ApiError(400, "fr is not supported: this server translates de -> en, en -> de")
    models.legs("cs", "fr")         # [cs -> en, en -> fr] when no model translates cs -> fr: a pivot

Each model has its own micro-batcher and worker thread (a multilingual model's directions share
its one), so a request's sentences only ever meet sentences of the same direction in a batch.
A direction no model was trained on but reachable through a pivot language (English first) is
translated in two legs by LibreTranslate's /translate (plain text), and its answer says so.
"""

from __future__ import annotations

from typing import Sequence

from attnmt.direction import Direction
from attnmt.errors import AttnmtError
from attnmt.server.api_errors import ApiError
from attnmt.server.ratelimit import check_rate
from attnmt.server.service import TranslationService, language_name

PIVOT = "en"  # the language a direction no model has goes through first, when a model reaches it


class ModelSet:
    """Several TranslationServices, at most one per direction; the first is the default of the
    routes that name no direction (/v1/model, and /v1/translate without source and target)."""

    def __init__(self, services: Sequence[TranslationService]):
        if not services:
            raise AttnmtError("the server needs at least one model")
        self.services = list(services)
        self.by_direction: dict[Direction, TranslationService] = {}
        for service in self.services:
            key = service.direction
            if key in self.by_direction:
                raise AttnmtError(f"{self.by_direction[key].name} and {service.name} both translate {service.arrow}: "
                                  f"serve one model per direction (join runs with '+' to serve them as one ensemble)")
            self.by_direction[key] = service

    @property
    def default(self) -> TranslationService:
        return self.services[0]

    @property
    def sources(self) -> list[str]:
        """The languages the server translates from, in the order the models were given."""
        return list(dict.fromkeys(s.source_lang for s in self.services))

    def sources_into(self, target: str) -> list[str]:
        """The languages the server translates into `target` from (directly, then through a pivot)."""
        direct = [s.source_lang for s in self.services if s.target_lang == target]
        return direct + [s for s in self.sources if s not in direct and s != target and self.pivot(s, target)]

    def describe_directions(self) -> str:
        """'this model translates de -> en' or 'this server translates de -> en, en -> de'."""
        arrows = ", ".join(s.arrow for s in self.services)
        return f"this {'model' if len(self.services) == 1 else 'server'} translates {arrows}"

    def route(self, source: str, target: str) -> TranslationService:
        """The model for source -> target; 400 naming the directions the server has when none does."""
        service = self.by_direction.get((source, target))
        if service is not None:
            return service
        if source not in self.sources:
            raise ApiError(400, f"{source} is not supported: {self.describe_directions()}")
        if target not in {s.target_lang for s in self.services}:
            raise ApiError(400, f"{target} is not supported: {self.describe_directions()}")
        via = self.pivot(source, target)
        if via is not None:
            raise ApiError(400, f"{Direction(source, target).arrow} is not supported directly: {self.describe_directions()} "
                                f"(LibreTranslate's /translate and /translate_file translate it through {via[2]})")
        raise ApiError(400, f"{Direction(source, target).arrow} is not supported: {self.describe_directions()}")

    def pivot(self, source: str, target: str) -> tuple[TranslationService, TranslationService, str] | None:
        """Services for source -> P and P -> target, P English when it can be (else the first
        other language that joins them), for a direction no model has; None when none joins them."""
        if (source, target) in self.by_direction or source == target:
            return None
        middles = [PIVOT] + sorted({s.target_lang for s in self.services} - {PIVOT})
        for middle in middles:
            first, second = self.by_direction.get((source, middle)), self.by_direction.get((middle, target))
            if first is not None and second is not None:
                return first, second, middle
        return None

    def legs(self, source: str, target: str) -> tuple[list[TranslationService], str | None]:
        """The services a source -> target translation goes through (one, or two through a pivot)
        and the pivot language; 400 naming the directions the server has when nothing reaches it."""
        if (source, target) not in self.by_direction:
            via = self.pivot(source, target)
            if via is not None:
                return [via[0], via[1]], via[2]
        return [self.route(source, target)], None

    def targets_of(self, source: str) -> list[str]:
        """What `source` is translated into: directly (model order), then through a pivot."""
        direct = [s.target_lang for s in self.services if s.source_lang == source]
        codes = dict.fromkeys([s.source_lang for s in self.services] + [s.target_lang for s in self.services])
        return direct + [t for t in codes if t not in direct and self.pivot(source, t) is not None]

    def languages(self) -> list[dict]:
        """LibreTranslate's /languages: every language the server reads or writes, each with the
        targets it translates into, directly or through a pivot (sources first, in model order;
        then languages only written)."""
        codes = list(dict.fromkeys([s.source_lang for s in self.services] + [s.target_lang for s in self.services]))
        return [dict(code=code, name=language_name(code), targets=self.targets_of(code)) for code in codes]

    def check_api_key(self, given: str | None) -> None:
        self.default.check_api_key(given)  # one key for the whole server (the settings are shared)

    def check_access(self, request, given: str | None) -> None:
        """403 for a wrong key, then 429 when the client (or the key) is over --req-limit."""
        self.check_api_key(given)
        check_rate(request, given if self.default.settings.api_key is not None else None)

    def check_texts(self, texts: Sequence[str]) -> None:
        self.default.check_texts(texts)
