"""The README and the results pages hold their own rules: the README short, its links and figures
true; docs/results.md and docs/performance.md open with a summary table, each row with its command."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.md"
PERFORMANCE = ROOT / "docs" / "performance.md"
CONFIGS = ROOT / "src" / "attnmt" / "configs"

README_MAX_LINES = 150  # the project brief's rule: what, install, use, one table per claim

LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMAND = re.compile(r"`(?:attnmt |\.venv/bin/python |python3? )[^`]*`|`[^`]*\b[\w./-]+\.(?:py|sh)\b[^`]*`")
FIGURE = re.compile(r"(?<![\w.,])\d[\d,]*\.\d+(?:%|x)?(?![\d])|(?<![\w.,])\d[\d,]*(?:%|x)(?![\w])")


def outside_fences(text: str) -> list[tuple[int, str]]:
    """(line number from 1, line) of every line not inside a ``` fence."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercased, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown page, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    for _, line in outside_fences(text):
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            base = slug(m.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
    return {base if n == 0 else f"{base}-{n}" for base, count in seen.items() for n in range(count)}


def tables(text: str) -> list[list[tuple[int, str]]]:
    """Each Markdown table (header, separator, rows) as its (line number, line) list."""
    found, current = [], []
    for number, line in outside_fences(text):
        if line.startswith("|"):
            current.append((number, line))
        elif current:
            found.append(current)
            current = []
    if current:
        found.append(current)
    return [t for t in found if len(t) >= 2 and re.match(r"\|[\s:|-]+\|$", t[1][1].strip())]


def first_section_line(text: str) -> int:
    """The line of the first `## ` heading outside a fence."""
    return next(number for number, line in outside_fences(text) if line.startswith("## "))


def packaged_configs() -> list[str]:
    names = sorted(p.stem for p in CONFIGS.glob("*.yaml"))
    assert names, f"no packaged configs in {CONFIGS}"
    return names


def test_readme_is_at_most_150_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; history and long tables go to docs/"


def test_readme_link_targets_exist():
    text = README.read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if not re.match(r"[a-z]+://", t) and not t.startswith("#")]
    assert any(t.startswith("docs/") and t.split("#")[0].endswith(".md") for t in targets), "README links no docs/*.md"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


@pytest.mark.parametrize("page", ["README.md", "docs/results.md", "docs/performance.md", "docs/usage.md"])
def test_anchor_links_name_a_heading(page):
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target) or "#" not in target:
            continue
        file_part, anchor = target.split("#", 1)
        linked = (path.parent / file_part) if file_part else path
        if linked.suffix != ".md" or not linked.exists():
            continue  # a missing file is the link test's to report
        if anchor not in anchors(linked.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, f"{page}: links to headings that do not exist: {broken}"


@pytest.mark.parametrize("page", [RESULTS, PERFORMANCE], ids=["results", "performance"])
def test_page_opens_with_a_summary_table_whose_rows_name_a_command(page):
    text = page.read_text(encoding="utf-8")
    found = tables(text)
    assert found, f"{page.name} has no table"
    summary = found[0]
    first_row = summary[0][0]
    assert first_row < first_section_line(text), f"{page.name}: the first table comes after the first section"
    assert first_row <= 60, f"{page.name}: the summary table starts on line {first_row}, past the first screen"
    rows = summary[2:]
    assert rows, f"{page.name}: the summary table has no rows"
    without = [number for number, line in rows if not COMMAND.search(line)]
    assert not without, f"{page.name}: summary rows on lines {without} name no command"
    unlinked = [number for number, line in rows if "](#" not in line]
    assert not unlinked, f"{page.name}: summary rows on lines {unlinked} link no section"


def test_results_summary_names_every_packaged_config():
    text = RESULTS.read_text(encoding="utf-8")
    summary = "\n".join(line for _, line in tables(text)[0])
    missing = [name for name in packaged_configs() if f"`{name}`" not in summary]
    assert not missing, f"docs/results.md's summary table has no row for {missing}"


def test_readme_names_every_packaged_config():
    text = README.read_text(encoding="utf-8")
    missing = [name for name in packaged_configs() if f"`{name}`" not in text]
    assert not missing, f"README.md does not name the packaged configs {missing}"


def test_readme_table_figures_are_in_the_docs():
    """Every figure of the README's tables is one the results or performance page states."""
    docs = RESULTS.read_text(encoding="utf-8") + "\n" + PERFORMANCE.read_text(encoding="utf-8")
    figures = [f for table in tables(README.read_text(encoding="utf-8")) for _, line in table[2:]
               for f in FIGURE.findall(line)]
    assert figures, "README.md's tables hold no figures"
    missing = sorted({f for f in figures
                      if not re.search(rf"(?<![\d.,]){re.escape(f)}(?![\d])", docs)})
    assert not missing, f"README.md's tables quote figures docs/results.md and docs/performance.md do not: {missing}"
