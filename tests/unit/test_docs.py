"""The README is a door, not the manual: at most 300 lines, the two set-up commands first, a
map of docs/ and a table of every API kind. Every relative link in the README and in docs/*.md
leads to a file that exists and, where it names an anchor, to a heading of that file (GitHub's
anchors), so moving a section cannot leave a link dangling."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sustain.probes.protocols.registry import KIND_NAMES
from sustain.service.config_file.load import parse

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """`text` without its fenced code blocks (a `# comment` there is no heading, a `[x](y)` no
    link)."""
    kept: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file: lower case, punctuation but
    `-` and `_` dropped, spaces as `-`, a repeated one suffixed -1, -2, ..."""
    found: set[str] = set()
    for line in prose(path.read_text()).splitlines():
        if (heading := re.match(r"#{1,6} (.+)", line)) is None:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1).strip())
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        unique, n = slug, 0
        while unique in found:
            n += 1
            unique = f"{slug}-{n}"
        found.add(unique)
    return found


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with that anchor in {linked.name}")
    return broken


def fenced_blocks(text: str) -> list[tuple[int, str]]:
    """Each fenced block of `text`: the line its fence opens on (1-based), and its body."""
    blocks, body, opened = [], list[str](), None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```") and opened is None:
            opened, body = number, []
        elif line.startswith("```") and opened is not None:
            blocks.append((opened, "\n".join(body)))
            opened = None
        elif opened is not None:
            body.append(line)
    return blocks


def test_the_readme_is_at_most_300_lines() -> None:
    assert len(README.read_text().splitlines()) <= 300


FIRST_SCREEN_LINES = 24
"""The README's lines a terminal or a repository page shows before any scrolling."""


def test_the_readme_opens_with_the_two_setup_commands_each_in_its_own_block() -> None:
    first, second, *rest = fenced_blocks(README.read_text())
    assert first[1] == "pip install . && sustain demo"
    assert second[1] == "pip install '.[test]' && pytest"
    assert second[0] <= FIRST_SCREEN_LINES, "both commands belong on the first screen"
    assert [line for line, _ in rest if line <= FIRST_SCREEN_LINES] == [], \
        "and no other command does"


def test_the_readme_names_every_api_kind() -> None:
    """Every kind of the protocol registry, as an endpoint's `api_kind` takes it, in the
    README's table of kinds (a kind added to the registry is added there too)."""
    text = README.read_text()
    named = set(re.findall(r"^\| `([a-z-]+)`", text, re.MULTILINE))
    assert set(KIND_NAMES) <= named, sorted(set(KIND_NAMES) - named)


def test_the_readme_maps_every_page_of_docs() -> None:
    text = README.read_text()
    assert [p.name for p in PAGES if f"(docs/{p.name})" not in text] == []


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_a_link_to_a_missing_anchor_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A section (`x`)\n\n[ok](#a-section-x) [bad](#gone)\n"
                    "```\n# not a heading\n[not](a-link.md)\n```\n")
    assert broken_links(page) == ["#gone: no heading with that anchor in page.md"]


def test_the_readme_config_example_is_a_valid_config_file() -> None:
    text = README.read_text()
    yaml_blocks = [body for _, body in fenced_blocks(text) if body.startswith("version: 1")]
    assert len(yaml_blocks) == 1
    config, _ = parse(yaml_blocks[0] + "\n", "README.md")  # ConfigError on any problem
    assert [p.name for p in config.probes] == ["vllm-a-2rps"]
    assert [s.name for s in config.slos] == ["vllm-a-availability"]
