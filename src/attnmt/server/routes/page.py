"""GET / (the attention page) and GET /docs (the API reference), both from files shipped in the
package: nothing is loaded from the internet."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

STATIC = Path(__file__).resolve().parents[1] / "static"

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/docs")
async def docs() -> FileResponse:
    return FileResponse(STATIC / "docs.html", media_type="text/html")
