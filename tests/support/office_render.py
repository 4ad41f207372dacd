"""LibreOffice (headless) as a tool the tests drive: it converts files the tests write into the
formats users have (.html -> .docx, .odt -> .docx, .odp -> .pptx), and it draws what attnmt wrote,
so that a test can look at the page: its pixels (pdftoppm), its words and where they are
(pdftotext -bbox), the fonts it used (pdffonts).

    converted = convert(soffice, [src_html, box_odt], "docx", out_dir, profile)   # one soffice run
    pdfs = convert(soffice, translated_files, "pdf", pdf_dir, profile)
    pixels = page_pixels(pdfs[0])                      # (height, width, 3) uint8, page 1, 100 dpi
    colour_pixels(pixels, (255, 0, 0))                 # how many pixels are that colour, near enough
    clusters(column_mask(pixels, NAVY))                # separate horizontal stretches of it (links)
    fonts(pdfs[0])                                     # ["LiberationSerif", "LiberationSerif-Bold", ...]

Every call is one process with a timeout; a profile folder of the test's own (`-env:UserInstallation`)
keeps parallel tests from sharing LibreOffice's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

DPI = 100
RED = (255, 0, 0)


def convert(soffice: str, files: Sequence[Path], target: str, out_dir: Path, profile: Path) -> list[Path]:
    """`files` converted to `target` (a suffix, or suffix:filter) in one soffice run; the paths of
    the results, in order (each checked to exist)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run = subprocess.run([soffice, f"-env:UserInstallation={profile.as_uri()}", "--headless", "--norestore",
                          "--convert-to", target, "--outdir", str(out_dir), *map(str, files)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    suffix = target.split(":")[0]
    results = [out_dir / f"{Path(f).stem}.{suffix}" for f in files]
    missing = [str(p) for p in results if not p.is_file()]
    assert not missing, (missing, run.stdout, run.stderr)
    return results


def page_pixels(pdf: Path, page: int = 1, dpi: int = DPI):
    """Page `page` of `pdf` drawn by pdftoppm, as a numpy array (height, width, 3) of uint8."""
    import numpy as np
    from PIL import Image

    stem = pdf.with_name(f"{pdf.stem}-page{page}")
    subprocess.run(["pdftoppm", "-png", "-r", str(dpi), "-f", str(page), "-l", str(page), "-singlefile", str(pdf),
                    str(stem)], check=True, timeout=120)
    with Image.open(f"{stem}.png") as image:
        return np.asarray(image.convert("RGB"))


def colour_mask(pixels, colour: tuple[int, int, int], tolerance: int = 80):
    """Where the page is `colour` (each channel within `tolerance`)."""
    import numpy as np

    return (np.abs(pixels.astype(int) - np.array(colour)) <= tolerance).all(axis=2)


def colour_pixels(pixels, colour: tuple[int, int, int], tolerance: int = 80) -> int:
    return int(colour_mask(pixels, colour, tolerance).sum())


def bluish(pixels):
    """Link colours (LibreOffice's navy #000080 and the blues of Word's Hyperlink style): blue well
    above red and green."""
    channels = pixels.astype(int)
    return (channels[..., 2] > channels[..., 0] + 60) & (channels[..., 2] > channels[..., 1] + 60)


def clusters(mask, gap: int = 4) -> list[tuple[int, int]]:
    """The horizontal stretches [x0, x1) of the page's columns where `mask` holds, stretches closer
    than `gap` pixels joined (the letters of one underlined link are one stretch)."""
    columns = [x for x, on in enumerate(mask.any(axis=0)) if on]
    out: list[list[int]] = []
    for x in columns:
        if out and x - out[-1][1] < gap:
            out[-1][1] = x + 1
        else:
            out.append([x, x + 1])
    return [(a, b) for a, b in out]


def rows(mask, top: int, bottom: int):
    """`mask` cut to rows [top, bottom) (one line of text)."""
    return mask[top:bottom]


def words(pdf: Path, page: int = 1) -> list[tuple[str, float, float, float, float]]:
    """Each word on page `page` and its box (xmin, ymin, xmax, ymax) in pixels at DPI (pdftotext -bbox)."""
    from lxml import etree

    out = subprocess.run(["pdftotext", "-bbox", "-f", str(page), "-l", str(page), str(pdf), "-"],
                         capture_output=True, check=True, timeout=120).stdout
    root = etree.fromstring(out, etree.XMLParser(recover=True))
    scale = DPI / 72
    return [(w.text or "", *(float(w.get(k)) * scale for k in ("xMin", "yMin", "xMax", "yMax")))
            for w in root.iter("{*}word")]


def fonts(pdf: Path) -> list[str]:
    """The names of the fonts `pdf` uses (pdffonts), subset prefixes removed."""
    out = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True, timeout=120).stdout
    names = [line.split()[0] for line in out.splitlines()[2:] if line.strip()]
    return [name.split("+", 1)[-1] for name in names]
