"""What routes get from the app: the loaded ModelSet, its default TranslationService, the
language identifier."""

from __future__ import annotations

from fastapi import Request

from attnmt.server.langid import LanguageDetector
from attnmt.server.api_errors import ApiError
from attnmt.server.routing import ModelSet
from attnmt.server.service import TranslationService


def get_service(request: Request) -> TranslationService:
    service = getattr(request.app.state, "service", None)
    if service is None:  # only between start-up and the model being loaded
        raise ApiError(503, "the model is still loading")
    return service


def get_models(request: Request) -> ModelSet:
    models = getattr(request.app.state, "models", None)
    if models is None:
        raise ApiError(503, "the models are still loading")
    return models


def get_detector(request: Request) -> LanguageDetector:
    detector = getattr(request.app.state, "detector", None)
    if detector is None:
        raise ApiError(503, "the language identifier is still loading")
    return detector
