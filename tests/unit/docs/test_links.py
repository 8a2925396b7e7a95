"""The documentation's relative links lead somewhere: every `[text](path)` and `path#anchor` in
README.md, docs/*.md, bench/README.md and bench/*/README.md names a file or folder that exists,
and an `#anchor` into a markdown file names one of its headings (GitHub's slugs). The README
stays a front door: at most 300 lines."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[3]
README_MAX_LINES = 300

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+[\"'(].*?[\"')])?\s*\)", re.S)
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def documents() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md",
             *sorted((ROOT / "bench").glob("*/README.md"))]
    return [path for path in found if path.is_file()]


def without_fences(text: str) -> str:
    """The text with fenced code blocks blanked (a `# comment` in a shell block is no heading)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code spans blanked (a link in code is not a link)."""
    return INLINE_CODE.sub(lambda m: " " * len(m.group(0)), without_fences(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower case, punctuation dropped
    (letters, digits, `_`, `-` and spaces stay), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a markdown file offers: its headings' slugs (a repeated slug gets -1, -2, ...)
    and explicit `<a name=...>`/`id=...` anchors."""
    text = path.read_text(encoding="utf-8")
    seen: dict[str, int] = {}
    found: set[str] = set()
    for match in HEADING.finditer(without_fences(text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(HTML_ANCHOR.findall(text))
    return found


def targets(text: str) -> list[str]:
    """Every link target in markdown text, code left out."""
    prose = without_code(text)
    found = [m.group(1) for m in LINK.finditer(prose)] + [m.group(1) for m in REFERENCE.finditer(prose)]
    return [target[1:-1] if target.startswith("<") and target.endswith(">") else target for target in found]


def shown(path: Path, root: Path) -> str:
    """`path` as seen from `root` (a link may climb out through `..`)."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """The relative links in `path` that lead nowhere, each with the reason (paths shown from `root`)."""
    broken = []
    for target in targets(path.read_text(encoding="utf-8")):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue  # absolute URLs (http:, mailto:, ...) are not checked here
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        if file_part.startswith("/"):
            destination = root / file_part.lstrip("/")
        else:
            destination = (path.parent / file_part) if file_part else path
        if not destination.exists():
            broken.append(f"{target}: no such file {shown(destination, root)}")
            continue
        if anchor and destination.is_file() and destination.suffix.lower() == ".md":
            if unquote(anchor).lower() not in anchors(destination):
                broken.append(f"{target}: no heading with the anchor #{anchor} in {shown(destination, root)}")
    return broken


@pytest.mark.parametrize("document", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_an_existing_file_and_heading(document):
    assert broken_links(document) == []


def test_the_link_check_reports_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## The `model: auto` router\n\n## Twice\n\n## Twice\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/page.md#the-model-auto-router) [ok](docs/page.md#twice-1) [ok](#top) [web](https://example.com/x)\n"
        "[gone](docs/missing.md) [bad anchor](docs/page.md#no-such-heading) [self](#nowhere)\n"
        "`[in code](docs/also-missing.md)`\n\n```\n[in a fence](docs/fenced-missing.md)\n```\n\n# Top\n")
    assert broken_links(readme, root=tmp_path) == [
        "docs/missing.md: no such file docs/missing.md",
        "docs/page.md#no-such-heading: no heading with the anchor #no-such-heading in docs/page.md",
        "#nowhere: no heading with the anchor #nowhere in README.md",
    ]


def test_the_readme_is_a_front_door_of_at_most_300_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in targets(readme)}
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert pages and pages <= linked, f"README.md does not link {sorted(pages - linked)}"
