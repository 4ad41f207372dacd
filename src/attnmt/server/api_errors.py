"""Every error leaves the service as LibreTranslate's `{"error": "..."}` with a 4xx status,
except a fault inside the model (500, for that request only). No traceback reaches a client.

    raise ApiError(400, "fr is not supported: this model translates de -> en")
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A client error (or a model fault, 500) with the message the client sees."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def describe_validation_errors(errors) -> str:
    """'beam_size: Input should be less than or equal to 16; texts: Field required'."""
    parts = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        parts.append(f"{'.'.join(loc) or 'body'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def _public_errors(errors) -> list[dict]:
    """Pydantic's errors without the offending input (which may be a megabyte of text)."""
    return [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors]


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception a route can raise to {"error": ...} JSON."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return error_response(exc.status, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(400, "Invalid request: malformed JSON body")
        return error_response(422, "Invalid request: " + describe_validation_errors(errors),
                              detail=_public_errors(errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):  # a bug: logged, never shown
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(500, "internal error (see the server log)")
