"""What routes get from the app: the loaded TranslationService."""

from __future__ import annotations

from fastapi import Request

from attnmt.server.errors import ApiError
from attnmt.server.service import TranslationService


def get_service(request: Request) -> TranslationService:
    service = getattr(request.app.state, "service", None)
    if service is None:  # only between start-up and the model being loaded
        raise ApiError(503, "the model is still loading")
    return service
