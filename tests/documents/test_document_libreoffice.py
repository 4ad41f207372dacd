"""A real client opens what attnmt writes: LibreOffice (headless) converts a translated .docx,
.pptx, .odt and .odp to PDF in one call, and each PDF holds the translated words. Skipped, with
the reason, where soffice is not installed (.ci/run installs it). With ATTNMT_KEEP_PNG=DIR, the
first page of each PDF is also drawn as DIR/NAME.png (pdftoppm), to look at."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path


from attnmt.documents import translate_document

from support import document_samples as samples

MAKERS = {".docx": lambda: samples.docx_bytes(paragraphs=12), ".pptx": samples.pptx_bytes,
          ".odt": samples.odt_bytes, ".odp": samples.odp_bytes}
EXPECTED = {".docx": ["red", "dog", "blue", "cat", "small"], ".pptx": ["house", "red", "big", "ball"],
            ".odt": ["red", "dog", "house", "big"], ".odp": ["red", "dog", "blue", "cat"]}


def test_libreoffice_converts_every_translated_office_file(tmp_path, soffice):
    from pypdf import PdfReader

    files = []
    for suffix, make in MAKERS.items():
        path = tmp_path / f"translated{suffix.replace('.', '_')}{suffix}"
        path.write_bytes(translate_document(make(), suffix, samples.fake_translate))
        files.append(path)
    out = tmp_path / "pdf"
    profile = (tmp_path / "profile").as_uri()
    run = subprocess.run([soffice, f"-env:UserInstallation={profile}", "--headless", "--norestore",
                          "--convert-to", "pdf", "--outdir", str(out), *map(str, files)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    for path, suffix in zip(files, MAKERS):
        pdf = out / (path.stem + ".pdf")
        assert pdf.is_file() and pdf.stat().st_size > 1000, (suffix, run.stdout, run.stderr)
        text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf.read_bytes())).pages).lower()
        for word in EXPECTED[suffix]:
            assert word in text.split() or word in text, (suffix, word, text[:300])
        assert "hund" not in text.split()  # nothing left untranslated (the fake translator maps every toy word)
        keep = os.environ.get("ATTNMT_KEEP_PNG")
        if keep and shutil.which("pdftoppm"):
            Path(keep).mkdir(parents=True, exist_ok=True)
            subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "1", "-singlefile", str(pdf),
                            str(Path(keep) / path.stem)], check=True, timeout=120)
