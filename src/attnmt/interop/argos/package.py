"""The Argos Translate package format (argostranslate/package.py, argos-translate 1.11): what a
`.argosmodel` holds, its metadata, its one sentencepiece model, and the zip both directions use.

    translate-de_en-1_0/             one top folder (argospm's name for the package)
        metadata.json                package_version, argos_version, from_code, from_name, to_code,
                                     to_name, [target_prefix]: `package_metadata` / `read_metadata`
        model/                       a CTranslate2 model folder (model.bin, config.json, vocabularies)
        sentencepiece.model          one model for both sides (argostranslate encodes the source and
                                     decodes the target with it)
        minisbd/<from_code>.onnx     the sentence splitter (splitter.py), so nothing is downloaded
        README.md                    shown by argospm and LibreTranslate

argostranslate decodes the pieces with `decode_pieces`, then turns every "▁" and every "_" into a
space. `shared_sentencepiece` makes the one model from a run's two: the source model, plus the
target model's pieces it lacks as UNUSED pieces (never produced by encoding, decoded as
written) and the language tokens as CONTROL pieces (decoded as nothing).

Shapes: none (files).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import zipfile
from pathlib import Path

from attnmt.direction import LANG_CODE_EXAMPLES, is_language
from attnmt.errors import AttnmtError
from attnmt.interop.argos.onnx_proto import bytes_field, float_field, int_field

METADATA = "metadata.json"
MODEL = "model"
SENTENCEPIECE = "sentencepiece.model"
SPLITTER = "minisbd"
README = "README.md"
SUFFIX = ".argosmodel"
ARGOS_VERSION = "1.9"  # what the packages of the Argos index declare (argostranslate reads it, checks nothing)
PACKAGE_VERSION = "1.0"
# Argos Translate's own language names (its package index), for metadata from_name / to_name
LANGUAGE_NAMES = {
    "ar": "Arabic", "az": "Azerbaijani", "bg": "Bulgarian", "bn": "Bengali", "ca": "Catalan", "cs": "Czech",
    "da": "Danish", "de": "German", "el": "Greek", "en": "English", "eo": "Esperanto", "es": "Spanish",
    "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fr": "French", "ga": "Irish",
    "gl": "Galician", "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian",
    "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "ms": "Malay", "nb": "Norwegian",
    "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak",
    "sl": "Slovenian", "sq": "Albanian", "sv": "Swedish", "th": "Thai", "tl": "Tagalog", "tr": "Turkish",
    "uk": "Ukrainian", "ur": "Urdu", "vi": "Vietnamese", "zh": "Chinese",
}
# sentencepiece's ModelProto.SentencePiece.Type
PIECE_UNUSED, PIECE_CONTROL = 5, 3


def language_name(code: str) -> str:
    """The name Argos Translate gives `code` (`pt_BR`: "Portuguese (pt_BR)"; unknown: the code)."""
    base = code.split("_")[0]
    name = LANGUAGE_NAMES.get(base, code)
    return name if base == code or name == code else f"{name} ({code})"


def package_name(from_code: str, to_code: str, version: str = PACKAGE_VERSION) -> str:
    """The top folder of a package, as argospm and Locomotive name it: translate-de_en-1_0."""
    return f"translate-{from_code}_{to_code}-{version.replace('.', '_')}"


def package_metadata(from_code: str, to_code: str, *, target_prefix: str = "",
                     version: str = PACKAGE_VERSION) -> dict:
    """metadata.json of a package translating `from_code` -> `to_code`."""
    found = {"package_version": version, "argos_version": ARGOS_VERSION, "type": "translate",
             "from_code": from_code, "from_name": language_name(from_code),
             "to_code": to_code, "to_name": language_name(to_code)}
    if target_prefix:
        found["target_prefix"] = target_prefix
    return found


def read_metadata(found, where: str) -> dict:
    """The fields attnmt uses from a package's metadata.json (already parsed within bounds),
    checked: a translate package of two language codes, names and versions that are strings,
    and a target_prefix that is a string.

    Raises:
        AttnmtError: one line naming `where` and the field.
    """
    if not isinstance(found, dict):
        raise AttnmtError(f"{where}: expected a JSON object, got {type(found).__name__}")
    kind = found.get("type", "translate")
    if kind != "translate":
        raise AttnmtError(f"{where}: type={kind!r:.40}: only translate packages hold a model attnmt loads")
    for key in ("from_code", "to_code"):
        value = found.get(key)
        if not isinstance(value, str) or not is_language(value):
            raise AttnmtError(f"{where}: {key}={value!r:.40} is not a language code ({LANG_CODE_EXAMPLES})")
    if found["from_code"] == found["to_code"]:
        raise AttnmtError(f"{where}: from_code and to_code are both {found['from_code']!r}: a package translates "
                          f"between two languages")
    for key in ("from_name", "to_name", "package_version", "argos_version", "target_prefix"):
        if not isinstance(found.get(key, ""), str) or len(found.get(key, "")) > 200:
            raise AttnmtError(f"{where}: {key} must be a string of at most 200 characters, got "
                              f"{found.get(key)!r:.40}")
    return {"from_code": found["from_code"], "to_code": found["to_code"],
            "from_name": found.get("from_name", ""), "to_name": found.get("to_name", ""),
            "package_version": found.get("package_version", ""), "target_prefix": found.get("target_prefix", "")}


# ----------------------------------------------------------------------------- the one sentencepiece model

def _piece(text: str, kind: int) -> bytes:
    """A ModelProto.pieces entry (field 1): piece (1), score (2), type (3)."""
    return bytes_field(1, bytes_field(1, text) + float_field(2, 0.0) + int_field(3, kind))


def shared_sentencepiece(source_model: Path, target_model: Path, *, control: list[str] = ()) -> bytes:
    """One sentencepiece model that encodes as `source_model` and decodes every piece of
    `target_model`: the source model's bytes, with the target pieces it lacks appended as UNUSED
    pieces and the `control` tokens (language tokens) as CONTROL pieces. Appending to a repeated
    field is appending to the serialized message (protobuf merges repeated fields in order), so
    the source model's pieces keep their ids and its encoding is unchanged."""
    import sentencepiece as spm

    data = source_model.read_bytes()
    source = spm.SentencePieceProcessor(model_file=str(source_model))
    known = {source.id_to_piece(i) for i in range(source.get_piece_size())}
    extra = b""
    if target_model != source_model and target_model.read_bytes() != data:
        target = spm.SentencePieceProcessor(model_file=str(target_model))
        for i in range(target.get_piece_size()):
            piece = target.id_to_piece(i)
            if piece not in known and not (target.is_control(i) or target.is_unknown(i)):
                extra += _piece(piece, PIECE_UNUSED)
                known.add(piece)
    for token in control:
        if token not in known:
            extra += _piece(token, PIECE_CONTROL)
            known.add(token)
    return data + extra


# ----------------------------------------------------------------------------- the zip

RECORD_FORMAT = "attnmt-argos-package-1"  # the zip comment of a package attnmt wrote


def entries_digest(archive: zipfile.ZipFile) -> str:
    """The sha256 of a zip's entries as its directory lists them (names, CRC-32s, sizes): what
    attnmt records in the comment of a package it writes, and checks before `--force` replaces it."""
    listed = sorted((info.filename, info.CRC, info.file_size) for info in archive.infolist())
    return hashlib.sha256(json.dumps(listed).encode("utf-8")).hexdigest()


def written_by_attnmt(path: Path) -> bool:
    """Whether `path` is a package attnmt wrote, unchanged since: a zip (not a link) whose comment
    is attnmt's record of exactly the entries it holds."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            record = json.loads(archive.comment.decode("utf-8"))
            return (isinstance(record, dict) and record.get("format") == RECORD_FORMAT
                    and record.get("entries_sha256") == entries_digest(archive))
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def write_zip(folder: Path, top: str, path: Path) -> None:
    """Zip `folder`'s files (sorted, deflated, fixed timestamps: the same package gives the same
    bytes) under the one top folder `top`, into `path` (a temporary file of atomic_write's), with
    attnmt's record of its entries as the zip comment (`written_by_attnmt`)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames.sort()
            for name in sorted(filenames):
                file = Path(dirpath) / name
                entry = zipfile.ZipInfo(f"{top}/{file.relative_to(folder).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
                entry.external_attr = (stat.S_IFREG | 0o644) << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                with open(file, "rb") as source, archive.open(entry, "w", force_zip64=True) as target:
                    shutil.copyfileobj(source, target, 1 << 20)
        archive.comment = json.dumps({"format": RECORD_FORMAT, "entries_sha256": entries_digest(archive)}).encode()
