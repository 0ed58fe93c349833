"""Every relative link in the docs resolves: README.md, ARCHITECTURE.md, CONTRIBUTING.md
and docs/*.md link files that exist, and a link with an anchor (`file.md#part`, `#part`)
names a heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces
made hyphens). Links to the web are not followed; links inside code are not links.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "CONTRIBUTING.md"] + sorted(
    (ROOT / "docs").glob("*.md")
)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`]*`", "", text)  # a code span may go over a line break


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    return LINK.findall(prose(path.read_text()))


def broken(path: Path) -> list[str]:
    out = []
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{target}: no heading #{anchor} in {dest.name}")
    return out


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert broken(path) == []


def test_the_readme_links_every_page_of_docs():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    assert sorted(p.name for p in pages - linked) == []


def test_the_check_catches_a_broken_link_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## Two words\n\nsee [b](b.md), [x](#two-words)\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n\n[ok](a.md#two-words) [gone](nope.md) [bad](a.md#three) [web](https://x.y)\n"
        "`[not a link](nope.md)`\n\n```\n[nor this](nope.md)\n```\n"
    )
    assert anchors(tmp_path / "a.md") == {"a", "two-words"}
    assert broken(doc) == ["nope.md: no such file", "a.md#three: no heading #three in a.md"]
