"""LibreTranslate's file translation: POST /translate_file (a multipart form: `file`, `source`,
`target`, `api_key`) answers {"translatedFileUrl": absolute URL}, which GET /download_file/<name>
serves until it expires (server/filestore.py).

Every format of attnmt.documents (its table: documents/formats.py) is read by the documents
package and translated with its structure kept: .txt line by line, .html with its markup, .docx,
.pptx, .odt, .odp, .epub, .srt, .po and .xliff in their own format; a .pdf comes back as .txt.
A file over --file-limit-kb, or one that inflates past the limits of documents.Limits.for_upload,
gets 413, as does one of more than --max-sentences sentences. `review_below` (a number in 0..1)
marks each paragraph translated less confidently for review (documents/review.py: a comment in
.docx and .odt, a translator comment in .po, a note in XLIFF; 400 for the formats without marks,
or a value outside 0..1). An input cut (a paragraph past search.max_input_tokens) is said in
`warnings`, a key LibreTranslate's clients ignore; an empty file, another extension, a second
file, a file that is not UTF-8 or not what its extension says, a corrupt or encrypted one get
400; a full store 429; a name that is not one the store gave out, or has expired, 404.
"""

from __future__ import annotations

import asyncio
from pathlib import PurePath

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse
from starlette.datastructures import UploadFile

from attnmt.documents import FORMATS, REVIEWED, DocumentError, Format, check_reviews, format_of
from attnmt.documents.review import check_review_below
from attnmt.server.documents import read_upload, translate_parsed
from attnmt.server.api_errors import ApiError
from attnmt.server.filestore import FileStore
from attnmt.server.limits import invalid_text
from attnmt.server.routing import ModelSet
from attnmt.server.routes.deps import get_models
from attnmt.server.routes.libretranslate import ERRORS, detect_sources
from attnmt.server.schemas import ErrorResponse, TranslateFileResponse

router = APIRouter(tags=["LibreTranslate"])

FIELDS = ("source", "target", "api_key", "retranslate", "review_below")
YES_NO = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False, "": False}
DETECT_CHARS = 4000  # `source: auto` guesses the language from the first characters of the file's text
DOWNLOAD_TYPES = tuple(dict.fromkeys(format_of(fmt.output_suffix).media_type for fmt in FORMATS))  # of translations


def describe_formats() -> str:
    """The formats /translate_file takes, from the table (".html (.htm)", ".pdf (into .txt)")."""
    def one(fmt: Format) -> str:
        notes = [*fmt.aliases, *([f"into {fmt.output}"] if fmt.output else [])]
        return f"{fmt.suffix} ({', '.join(notes)})" if notes else fmt.suffix
    return ", ".join(one(fmt) for fmt in FORMATS)


_FILE_DOC = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "additionalProperties": False, "required": ["file", "source", "target"], "properties": {
        "file": {"type": "string", "format": "binary",
                 "description": f"a document, by its extension: {describe_formats()}; text formats in UTF-8"},
        "source": {"type": "string", "description": "source language code, or 'auto'"},
        "target": {"type": "string", "description": "target language code"},
        "api_key": {"type": "string", "description": "needed when the server runs with --api-key"},
        "retranslate": {"type": "string", "enum": ["true", "false"],
                        "description": "a .po or XLIFF file's existing translations: translated again (true) "
                                       "or kept (false, the default); machine output is marked for review"},
        "review_below": {"type": "string",
                         "description": f"a number in 0..1: each paragraph translated less confidently is marked "
                                        f"for review, as the format's tools read it ({', '.join(REVIEWED)} only): "
                                        f"a comment by attnmt (.docx, .odt), a translator comment (.po), a note "
                                        f"(XLIFF); absent or empty: no marks"}}}}}}}


def get_files(request: Request) -> FileStore:
    store = getattr(request.app.state, "files", None)
    if store is None:
        raise ApiError(503, "the server is still starting")
    return store


async def read_file_form(request: Request) -> tuple[dict[str, str], UploadFile]:
    """The form's text fields and its one file; 400 for anything else."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/x-www-form-urlencoded":  # such a form cannot hold a file
        raise ApiError(400, "Invalid request: missing file parameter (send the file in a multipart/form-data body)")
    if content_type != "multipart/form-data":
        raise ApiError(400, f"Invalid request: send the file as multipart/form-data, not {content_type or 'an untyped body'}")
    try:
        form = await request.form(max_files=len(FIELDS) + 1, max_fields=len(FIELDS) + 1)
    except Exception:  # malformed, or more parts than the form can hold
        raise ApiError(400, "Invalid request: malformed form body (one file, and source, target, api_key)") from None
    fields, files = {}, []
    for key, value in form.multi_items():
        if key == "file" and not isinstance(value, str):
            files.append(value)
        elif key not in FIELDS:
            raise ApiError(400, f"Invalid request: unknown parameter {key}")
        elif not isinstance(value, str):
            raise ApiError(400, f"Invalid request: {key} must be text, not a file")
        elif key in fields:
            raise ApiError(400, f"Invalid request: {key} is given twice")
        else:
            fields[key] = value
    if len(files) != 1:
        raise ApiError(400, "Invalid request: missing file parameter" if not files else
                            f"Invalid request: send one file per request, not {len(files)}")
    problem = invalid_text(fields)
    if problem:
        raise ApiError(400, problem)
    return fields, files[0]


def file_format(upload: UploadFile) -> Format:
    """The upload's format, by its extension (any case; .htm counts as .html, .xlf as .xliff,
    .pot as .po); 400 otherwise."""
    try:
        return format_of(PurePath(upload.filename or "").suffix)
    except DocumentError as err:
        raise ApiError(400, "Invalid request: " + str(err).removeprefix("the file: ")) from None


def review_setting(value: str, fmt: Format) -> float | None:
    """The form's review_below: None when absent or empty, else a number in 0..1 for a format
    with review marks; 400 otherwise."""
    if not value.strip():
        return None
    try:
        below = float(value)
    except ValueError:
        raise ApiError(400, f"Invalid request: review_below={value!r} must be a number") from None
    try:
        check_review_below(below)
        check_reviews(fmt, below, "the file")
    except ValueError as err:  # out of 0..1, or a format without marks
        raise ApiError(400, f"Invalid request: {err}") from None
    return below


@router.post("/translate_file", response_model=TranslateFileResponse, response_model_exclude_none=True,
             responses=ERRORS, openapi_extra=_FILE_DOC)
async def translate_file(request: Request, models: ModelSet = Depends(get_models)) -> TranslateFileResponse:
    """Translate a file (.txt, .html, .docx, .pptx, .odt, .odp, .epub, .srt, .po, .xliff; .pdf into
    .txt); the answer is the URL of the translation (served for --files-expire-minutes)."""
    store = get_files(request)
    fields, upload = await read_file_form(request)
    models.check_access(request, fields.get("api_key"))
    for name in ("source", "target"):
        if not fields.get(name):
            raise ApiError(400, f"Invalid request: missing {name} parameter")
    fmt = file_format(upload)
    retranslate = YES_NO.get(fields.get("retranslate", "").strip().lower())
    if retranslate is None:
        raise ApiError(400, "Invalid request: retranslate must be true or false")
    review_below = review_setting(fields.get("review_below", ""), fmt)
    settings = models.default.settings
    data = await upload.read(settings.file_limit_kb * 1000 + 1)
    if len(data) > settings.file_limit_kb * 1000:
        raise ApiError(413, f"Invalid request: the file is over {settings.file_limit_kb} kB (--file-limit-kb)")
    source, target = fields["source"], fields["target"]
    if source != "auto":
        models.legs(source, target)  # directly, or through a pivot language; refused before the file is read
    document = await read_upload(data, fmt.suffix, target, file_limit_bytes=settings.file_limit_kb * 1000,
                                 retranslate=retranslate, review_below=review_below)
    if source == "auto":  # the language of the document's own text (an HTML file's without its tags)
        readable = " ".join(document.sentences)[:DETECT_CHARS]
        source = (await detect_sources(request, models, [readable], target))[0]["language"]
        models.legs(source, target)
    translated, warnings = await translate_parsed(models, document, source, target,
                                                  max_sentences=settings.max_sentences)
    name = await asyncio.to_thread(store.save, translated, fmt.output_suffix)
    return TranslateFileResponse(translatedFileUrl=str(request.url_for("download_file", name=name)),
                                 warnings=warnings or None)


@router.get("/download_file/{name}", name="download_file", response_class=FileResponse,
            responses={200: {"content": {media.split(";")[0]: {} for media in DOWNLOAD_TYPES}},
                       404: {"model": ErrorResponse, "description": "No such file, or it has expired"}})
async def download_file(name: str, request: Request) -> FileResponse:
    """A file that POST /translate_file translated, while it has not expired."""
    path = await asyncio.to_thread(get_files(request).find, name)
    if path is None:
        raise ApiError(404, "File not found: it may have expired")
    return FileResponse(path, media_type=format_of(path.suffix).media_type, filename=f"translated{path.suffix}")
