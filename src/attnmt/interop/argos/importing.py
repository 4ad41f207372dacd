"""`attnmt import PACKAGE.argosmodel -o runs/NAME`: an Argos Translate package (a stranger's zip)
becomes a folder attnmt loads like its own CTranslate2 export (engines/ctranslate2.py):
translate, evaluate, serve (the page's attention from CTranslate2's return_attention), a
teacher for `attnmt distill`.

    run = import_argos("translate-de_en-1_0.argosmodel", "runs/argos-de-en")

The package is read within limits (untrusted.ZipPackage: entries, sizes, ratios, CRCs; here also:
one top folder, no name leaving it, no links), its metadata.json within untrusted.load_json's
bounds, its model.bin parsed and checked (model_bin.py) before CTranslate2 opens it. Each refusal
is one line naming the package and the part. A package attnmt wrote holds attnmt's export in its
model/ (checked against its checksums.json and against metadata.json): that export is the run,
exactly. Any other (Locomotive's, the Argos index's) gets a pipeline from its files:
sentencepiece.model on both sides, the vocabularies of CTranslate2's model folder with the
specials its config.json names, and a config whose model section says what model.bin holds.

Shapes: none (files).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path, PurePosixPath

from attnmt.config import config_from_dict, save_config
from attnmt.data.corpus import MULTI30K_LANGS
from attnmt.data.languages import Languages, lang_token
from attnmt.data.pipeline import TextPipeline
from attnmt.data.tokenizers import SentencePieceTokenizer
from attnmt.data.vocab import Vocab
from attnmt.direction import Direction
from attnmt.engines.ctranslate2_export import import_ctranslate2
from attnmt.errors import AttnmtError, CheckpointError
from attnmt.files import WRITTEN, check_folder_output, refuse_overwrite, staged_folder, write_json, writer_lock, writing
from attnmt.interop.argos.model_bin import read_model_bin, transformer_architecture
from attnmt.interop.argos.package import METADATA, MODEL, README, SENTENCEPIECE, read_metadata
from attnmt.run_dir import EXPORT_CONFIG, EXPORT_INFO, RunDir
from attnmt.untrusted import ArchiveError, ZipLimits, ZipPackage, load_json

log = logging.getLogger(__name__)

# a package is held in memory while it is read: the largest of the Argos index are ~300 MB
LIMITS = ZipLimits(max_entries=2_000, max_unpacked_bytes=1_500_000_000, max_ratio=200.0)
MAX_PACKAGE_BYTES = 1_500_000_000
MAX_SMALL_FILE = 64 * 1024 * 1024  # metadata, config, vocabularies, sentencepiece
IMPORT_INFO = "attnmt_argos.json"  # in the imported folder: the package's metadata and README, where it came from
KIND = f"an imported Argos package ({IMPORT_INFO})"  # what --overwrite replaces (files.WRITTEN's record)
VOCABULARIES = ("shared_vocabulary.json", "shared_vocabulary.txt", "source_vocabulary.json", "source_vocabulary.txt",
                "target_vocabulary.json", "target_vocabulary.txt")
PADS = ("<blank>", "<pad>")  # OpenNMT's and attnmt's padding tokens


def is_package(path: str | Path) -> bool:
    """Whether `path` is a file to import as an Argos package (not a Marian folder)."""
    return Path(path).is_file()


# ----------------------------------------------------------------------------- reading the zip

def _entry_path(name: str, info, where: str) -> PurePosixPath | None:
    """A zip entry's path inside the package (None for a folder entry), refused when it could
    land outside the folder it is extracted to, or is not a plain file."""
    if "\\" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":") or "\x00" in name:
        raise ArchiveError(f"{where}: {name} is not a relative path inside the package: refused")
    parts = PurePosixPath(name).parts
    if any(part in ("..", ".") for part in name.rstrip("/").split("/")) or not parts:
        raise ArchiveError(f"{where}: {name} leaves the package's folder: refused")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ArchiveError(f"{where}: {name} is a symbolic link: a package holds plain files only")
    if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ArchiveError(f"{where}: {name} is not a plain file (mode {oct(mode)})")
    return None if name.endswith("/") else PurePosixPath(name)


def read_package(path: Path) -> tuple[str, dict[str, bytes]]:
    """The package's top folder and its files (path below the top folder -> bytes).

    Raises:
        ArchiveError: not a zip, a zip bomb, names leaving the folder, links, files outside one
            top folder (each naming the package and the entry).
    """
    size = path.stat().st_size
    if size > MAX_PACKAGE_BYTES:
        raise ArchiveError(f"{path}: {size:,} bytes; at most {MAX_PACKAGE_BYTES:,} are read as an Argos package")
    with open(path, "rb") as handle:
        data = handle.read()
    if not data.startswith(b"PK\x03\x04"):
        raise ArchiveError(f"{path}: not an Argos package (a .argosmodel is a zip archive; this is not one) "
                           f"and not a folder (a Marian / OPUS-MT model is one)")
    archive = ZipPackage(data, str(path), LIMITS)
    found = [(name, _entry_path(name, archive.infos[name], str(path))) for name in archive.names()]
    tops = {PurePosixPath(name).parts[0] for name, _ in found}
    for name, entry in found:
        if entry is not None and len(entry.parts) < 2:
            raise ArchiveError(f"{path}: {name} lies outside the package's one top folder")
    if len(tops) != 1:
        raise ArchiveError(f"{path}: holds {len(tops)} top folders ({', '.join(sorted(tops)[:3])}); an Argos package "
                           f"is one folder")
    files: dict[str, bytes] = {}
    seen: set[str] = set()
    for name, entry in found:
        if entry is None:
            continue
        inner = str(PurePosixPath(*entry.parts[1:]))
        if inner.lower() in seen:
            raise ArchiveError(f"{path}: names {inner} twice (in letters of another case)")
        seen.add(inner.lower())
        files[inner] = archive.read(name)
    return tops.pop(), files


def _small_json(files: dict[str, bytes], name: str, where: str):
    data = files[name]
    if len(data) > MAX_SMALL_FILE:
        raise ArchiveError(f"{where}: {name} is {len(data):,} bytes; at most {MAX_SMALL_FILE:,} are read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ArchiveError(f"{where}: {name} is not UTF-8 text: {err}") from None
    return load_json(text, source=f"{where}: {name}", error=ArchiveError)


def _vocabulary(files: dict[str, bytes], name: str, where: str) -> list[str]:
    """A CTranslate2 vocabulary file (.json: a list of strings; .txt: one token a line)."""
    if name.endswith(".json"):
        tokens = _small_json(files, name, where)
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise ArchiveError(f"{where}: {name} is not a JSON list of tokens")
        return tokens
    try:
        return files[name].decode("utf-8").split("\n")[:-1] if files[name].endswith(b"\n") else \
            files[name].decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        raise ArchiveError(f"{where}: {name} is not UTF-8 text: {err}") from None


# ----------------------------------------------------------------------------- the import

def import_argos(package: str | Path, run_dir: str | Path, *, overwrite: bool = False) -> RunDir:
    """Write `run_dir`, a folder attnmt's CTranslate2 engine loads, from the Argos package `package`.

    Raises:
        AttnmtError: the package is refused (one line: the package, the part and why), or
            `run_dir` is not empty and not an earlier import (`overwrite` replaces only that).
    """
    package, out = Path(package), Path(run_dir)
    refuse_overwrite(out, {"package": package})
    check_folder_output(out, {}, force=overwrite, kind=KIND, flag="--overwrite")
    top, files = read_package(package)
    where = f"{package}: {top}"
    for name in (METADATA, f"{MODEL}/model.bin", f"{MODEL}/config.json"):
        if name not in files:
            raise ArchiveError(f"{where}: has no {name} (an Argos package holds metadata.json and a CTranslate2 "
                               f"model in model/)")
    if SENTENCEPIECE not in files:
        other = " (it holds bpe.model: subword-nmt over Moses tokens, which attnmt does not read)" \
            if "bpe.model" in files else ""
        raise ArchiveError(f"{where}: has no {SENTENCEPIECE}{other}")
    metadata = read_metadata(_small_json(files, METADATA, where), f"{where}/{METADATA}")
    target = Path(os.path.abspath(out))
    with writer_lock(target.parent, name=f".{target.name}.lock"), staged_folder(out, kind=KIND) as staging:
        with writing(staging, f"{out} is as it was" if out.exists() else f"nothing was written to {out}"):
            for name, data in files.items():
                if name.startswith(f"{MODEL}/") and name.count("/") == 1 and name != f"{MODEL}/{WRITTEN}":
                    (staging / name.split("/", 1)[1]).write_bytes(data)
            (staging / SENTENCEPIECE).write_bytes(files[SENTENCEPIECE])
        if (staging / EXPORT_INFO).is_file():
            _check_attnmt_export(staging, metadata, where)
        else:
            for name in list(staging.iterdir()):
                if name.name not in (SENTENCEPIECE, "model.bin", "config.json", "vmap.txt", *VOCABULARIES):
                    name.unlink()  # files of another tool's model folder: not read, not kept
            _write_pipeline(staging, metadata, where)
        readme = files.get(README, b"")[:64 * 1024].decode("utf-8", "replace")
        write_json(staging / IMPORT_INFO, {"package": package.name, "top_folder": top, "metadata": metadata,
                                           "readme": readme})
        run = RunDir(staging)
        run.record_checksums([IMPORT_INFO])
        _check_loads(staging, where)
    log.info("imported %s (%s -> %s) -> %s", package, metadata["from_code"], metadata["to_code"], out)
    return RunDir(out)


def _check_attnmt_export(folder: Path, metadata: dict, where: str) -> None:
    """A package attnmt wrote: its model/ is attnmt's export, intact and of the package's direction."""
    run = RunDir(folder)
    try:
        run.verify_all()
        cfg = run.config()
    except (CheckpointError, AttnmtError) as err:
        raise CheckpointError(f"{where}: model/ holds attnmt's export files that do not check: {err}") from None
    directions = [(d.source, d.target) for d in cfg.data.directions()]
    if (metadata["from_code"], metadata["to_code"]) not in directions:
        raise CheckpointError(f"{where}/{METADATA}: says {metadata['from_code']} -> {metadata['to_code']}, but the "
                              f"model in model/ translates {', '.join(f'{s}-{t}' for s, t in directions)} "
                              f"({MODEL}/{EXPORT_CONFIG})")
    if len(directions) > 1 and metadata["target_prefix"] != lang_token(metadata["to_code"]):
        raise CheckpointError(f"{where}/{METADATA}: target_prefix={metadata['target_prefix']!r} is not "
                              f"{lang_token(metadata['to_code'])}, the token that makes this model write "
                              f"{metadata['to_code']}")


def _specials(config: dict, tokens: list[str], name: str, where: str) -> dict[str, str]:
    """The vocabulary's specials from CTranslate2's config.json (pad: <blank> or <pad>, else bos)."""
    found = {"unk": config.get("unk_token", "<unk>"), "bos": config.get("decoder_start_token") or
             config.get("bos_token", "<s>"), "eos": config.get("eos_token", "</s>")}
    for role, token in found.items():
        if not isinstance(token, str) or token not in tokens:
            raise CheckpointError(f"{where}: model/config.json names {role} token {token!r:.40}, which {name} lacks")
    found["pad"] = next((t for t in PADS if t in tokens and t not in found.values()), found["bos"])
    return found


def _write_pipeline(folder: Path, metadata: dict, where: str) -> None:
    """tokenizers.json, vocab.*.json, attnmt_config.json and attnmt_export.json for a package
    attnmt did not write, from what its files say (checked against model.bin)."""
    config = load_json((folder / "config.json").read_text(encoding="utf-8", errors="replace"),
                       source=f"{where}/model/config.json", error=CheckpointError)
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: model/config.json is not a JSON object")
    for flag in ("add_source_bos", "add_source_eos"):
        if config.get(flag):
            raise CheckpointError(f"{where}: model/config.json sets {flag}: attnmt's engine gives CTranslate2 the "
                                  f"source tokens as its vocabulary has them, with no tokens added")
    found = read_model_bin(folder / "model.bin")
    arch = transformer_architecture(found, Path(f"{where}/model/model.bin"))
    files = {n: n for n in VOCABULARIES if (folder / n).is_file()}
    raw = {n: (folder / n).read_bytes() for n in files}
    shared = next((n for n in VOCABULARIES[:2] if n in files), None)
    src_name = shared or next((n for n in VOCABULARIES[2:4] if n in files), None)
    tgt_name = shared or next((n for n in VOCABULARIES[4:] if n in files), None)
    if src_name is None or tgt_name is None:
        raise CheckpointError(f"{where}: model/ has no vocabulary (shared_vocabulary.json, or source_ and "
                              f"target_vocabulary.json)")
    src_tokens, tgt_tokens = _vocabulary(raw, src_name, where), _vocabulary(raw, tgt_name, where)
    for name, tokens, size in ((src_name, src_tokens, arch["src_vocab"]), (tgt_name, tgt_tokens, arch["tgt_vocab"])):
        if len(tokens) != size:
            raise CheckpointError(f"{where}: model/{name} has {len(tokens)} tokens, model.bin's embeddings "
                                  f"{size}")
    try:
        src_vocab = Vocab(src_tokens, specials=_specials(config, src_tokens, src_name, where))
        tgt_vocab = Vocab(tgt_tokens, specials=_specials(config, tgt_tokens, tgt_name, where))
    except ValueError as err:
        raise CheckpointError(f"{where}: model/'s vocabularies: {err}") from None
    from_code, to_code, prefix = metadata["from_code"], metadata["to_code"], metadata["target_prefix"]
    languages = None
    if prefix:
        if prefix != lang_token(to_code) or prefix not in tgt_vocab.stoi:
            raise CheckpointError(f"{where}/{METADATA}: target_prefix={prefix!r:.40}: attnmt forces its own language "
                                  f"tokens only ({lang_token(to_code)}), and only one the target vocabulary holds")
        languages = Languages((Direction(from_code, to_code),), placement="target")
    tokenizer = SentencePieceTokenizer(folder / SENTENCEPIECE)  # refused here if it is not a sentencepiece model
    pipeline = TextPipeline(tokenizer, tokenizer, src_vocab, tgt_vocab, languages)
    pipeline.save(folder)
    multi30k = from_code in MULTI30K_LANGS and to_code in MULTI30K_LANGS
    data = {"corpus": "multi30k" if multi30k else "none", "tokenizer": "sentencepiece",
            "spm_joint": True, "spm_vocab_size": tokenizer.vocab_size}
    data.update({"pairs": [f"{from_code}-{to_code}"]} if languages else {"src_lang": from_code, "tgt_lang": to_code})
    if arch["activation"] not in ("relu", "gelu", "swish"):
        raise CheckpointError(f"{where}: model/model.bin uses {arch['activation']}, which attnmt's Transformer lacks")
    model = {"arch": "transformer", "d_model": arch["d_model"], "heads": arch["heads"], "ff_dim": arch["ff_dim"],
             "enc_layers": arch["enc_layers"], "dec_layers": arch["dec_layers"], "pre_norm": arch["pre_norm"],
             "activation": arch["activation"], "dropout": 0.1}
    # argostranslate's decoding: beam 4 and unknown words copied from the source (its length penalty
    # is CTranslate2's, length^0.2; attnmt's engine ranks beams by the GNMT penalty: docs/interop.md);
    # the budget counts the pieces as typed: a model trained on what the web holds answers capitals
    # in capitals (search.budget_in_lower_case)
    cfg = config_from_dict({"data": data, "model": model,
                            "search": {"beam_size": 4, "length_penalty": 0.2, "replace_unk": True,
                                       "budget_in_lower_case": False}},
                           source=f"{where} (as attnmt's config)")
    save_config(cfg, folder / EXPORT_CONFIG)
    ctranslate2 = import_ctranslate2()
    write_json(folder / EXPORT_INFO, {
        "format": "ctranslate2", "ctranslate2_version": ctranslate2.__version__, "quantization": arch["quantization"],
        "attention_layer": arch["attention_layer"], "attention_heads": arch["attention_heads"],
        "decoder_layers": arch["dec_layers"], "imported_from": "argos"})
    RunDir(folder).record_checksums(sorted(p.name for p in folder.iterdir() if p.is_file()))


def _check_loads(folder: Path, where: str) -> None:
    """CTranslate2 opens the model (refused here, before the folder is renamed into place)."""
    import torch

    ctranslate2 = import_ctranslate2()
    threads = torch.get_num_threads()  # CTranslate2 sets OpenMP's (and so torch's) to intra_threads
    try:
        ctranslate2.Translator(str(folder), device="cpu", inter_threads=1, intra_threads=1)
    except (RuntimeError, ValueError) as err:
        raise CheckpointError(f"{where}: CTranslate2 cannot load its model: {err}") from None
    finally:
        torch.set_num_threads(threads)
