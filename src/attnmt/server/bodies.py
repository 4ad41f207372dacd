"""The body of a LibreTranslate request, as every one of its endpoints reads it: JSON, a
urlencoded form or a multipart form, each read as UTF-8 and checked for valid Unicode.

    data = await read_body(request)     # {"q": ..., "source": ..., ...}
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from fastapi import Request
from pydantic import BaseModel, ValidationError

from attnmt.server.api_errors import ApiError
from attnmt.server.limits import invalid_text


async def read_body(request: Request) -> dict:
    """The body as a dict, from JSON or a form (LibreTranslate accepts both). Its text is valid
    Unicode: RequestLimits has checked a JSON body; a form's is checked here."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json"):
        raw = await request.body()
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise ApiError(400, "Invalid request: malformed JSON body") from None
        if not isinstance(data, dict):
            raise ApiError(400, "Invalid request: the JSON body must be an object")
        return data
    if content_type == "application/x-www-form-urlencoded":
        # parsed here, not by starlette, which reads raw bytes as latin-1 ("Größe" -> "GrÃ¶ÃŸe")
        # and turns invalid percent-escapes into U+FFFD without a word
        try:
            pairs = parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True, errors="strict")
        except UnicodeDecodeError:
            raise ApiError(400, "Invalid request: the form body is not valid UTF-8") from None
        return _fields(pairs)
    if content_type == "multipart/form-data":
        try:
            form = await request.form()
        except Exception:  # a malformed multipart body
            raise ApiError(400, "Invalid request: malformed form body") from None
        pairs = list(form.multi_items())
        for key, value in pairs:
            if not isinstance(value, str):
                raise ApiError(400, f"Invalid request: {key} must be text, not a file")
        data = _fields(pairs)
        problem = invalid_text(data)  # a part's charset (unicode_escape, utf-7) can decode to surrogates
        if problem:
            raise ApiError(400, problem)
        return data
    if not content_type and not await request.body():
        return {}
    raise ApiError(400, f"Invalid request: send a JSON or a form body, not {content_type or 'an untyped body'}")


def _fields(pairs) -> dict:
    """Form fields as a dict: a repeated field becomes a list (so `q` may name several texts)."""
    data: dict = {}
    for key, value in pairs:
        if key in data:
            data[key] = (data[key] if isinstance(data[key], list) else [data[key]]) + [value]
        else:
            data[key] = value
    return data


async def read_model(request: Request, model: type[BaseModel]) -> BaseModel:
    """The request's body (JSON, form or multipart) as `model`, whose fields are strings.

    Raises:
        ApiError: 400 naming an unknown parameter or one that is not a string.
    """
    try:
        return model.model_validate(await read_body(request))
    except ValidationError as err:
        first = err.errors()[0]
        name = str(first["loc"][0]) if first.get("loc") else "body"
        if first.get("type") == "extra_forbidden":
            raise ApiError(400, f"Invalid request: unknown parameter {name}") from None
        raise ApiError(400, f"Invalid request: {name} must be a string") from None
