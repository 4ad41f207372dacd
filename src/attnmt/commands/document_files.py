"""`attnmt translate RUN -i FILE.docx -o OUT.docx`: a document (a format of documents/formats.py,
by its extension or an alias, but .txt, which stays a line file here) translated into the same
format (.pdf into .txt), written atomically, with --review-below P its paragraphs less confident
than P marked for review (documents/review.py: .docx, .odt, .po, .xliff). The options of line
files that have no meaning for a document are refused, and so is --review-below for a format
without review marks."""

from __future__ import annotations

from pathlib import PurePath

from attnmt.errors import AttnmtError

LINE_SUFFIXES = (".txt",)  # -i FILE.txt (or any other name) stays a line file of `translate`


def wanted(args) -> bool:
    """Whether -i names a document (by its extension: a row of the table of formats)."""
    from attnmt.documents import find_format

    if args.input is None:
        return False
    fmt = find_format(PurePath(args.input).suffix)
    return fmt is not None and fmt.suffix not in LINE_SUFFIXES


def run(args) -> int:
    from attnmt.commands import file_jobs
    from attnmt.commands.arguments import decoding_options
    from attnmt.documents import check_reviews, format_of, normalize_suffix, translate_file
    from attnmt.files import atomic_write

    fmt = format_of(PurePath(args.input).suffix, args.input)
    suffix, expected = fmt.suffix, fmt.output_suffix
    if args.output is None:
        raise AttnmtError(f"-i {args.input}: a {suffix} document is written to a file: give -o FILE{expected}")
    if normalize_suffix(PurePath(args.output).suffix, args.output) != expected:
        raise AttnmtError(f"-o {args.output}: a {suffix} document is translated into a {expected} file: "
                          f"name the output *{expected}")
    for flag, ok in (("--n-best", args.n_best == 1), ("--alignments", not args.alignments),
                     ("--glossary", args.glossary is None), ("--sampling-topk", args.sampling_topk == 1),
                     ("--workers", args.workers == 1), ("--shard-lines", args.shard_lines is None)):
        if not ok:
            raise AttnmtError(f"{flag} applies to line files; -i {args.input} is a {suffix} document")
    review_below = getattr(args, "review_below", None)
    check_reviews(fmt, review_below, f"-i {args.input}", setting="--review-below", error=AttnmtError)
    file_jobs.refuse_overwriting_inputs(args.output, {"input (-i)": args.input}, args.run_dir)
    options = decoding_options(args)
    with file_jobs.torch_threads(args.threads), \
            file_jobs.open_translator(args.run_dir, checkpoint=args.checkpoint, device=args.device,
                                      engine=args.engine) as translator:
        data, _ = translate_file(translator, args.input, options, retranslate=getattr(args, "retranslate", False),
                                 review_below=review_below)
    atomic_write(args.output, lambda tmp: tmp.write_bytes(data))
    return 0
