"""Every relative link in README.md, CHANGELOG.md and docs/*.md resolves: the file exists, and
an #anchor names a heading of the target page (GitHub's slugs); the import layers that
docs/architecture.md lists are pyproject.toml's."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE = re.compile(r"(`+).*?\1", re.S)


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: dict[str, int] = {}
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if match := re.match(r"#{1,6}\s+(.*)", line):
            base = slug(match.group(1))
            count = found.get(base, 0)
            found[base] = count + 1
            found.setdefault(f"{base}-{count}" if count else base, 1)
    return set(found)


def broken_links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{page.name}: {target} (no heading #{anchor})")
    return broken


def test_every_relative_link_and_anchor_resolves():
    assert len(pages()) > 10
    broken = [line for page in pages() for line in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_checker_finds_a_missing_file_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## Traditional → simplified\n")
    page.write_text(
        "# Page\n[fine](other.md#traditional--simplified) [self](#page) `[code](nowhere.md)`\n"
        "[gone](missing.md) [no heading](other.md#nothing) ![img](other.md)\n"
        "```\n[fenced](nowhere.md)\n```\n"
    )
    assert broken_links(page) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nothing (no heading #nothing)",
    ]


def test_the_architecture_page_lists_the_import_layers_pyproject_declares():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = declared["tool"]["importlinter"]["contracts"][0]["layers"]
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = page.split("## The import contract", 1)[1].split("```")[1].strip()
    assert block.splitlines() == layers
    assert "exclude_type_checking_imports" not in declared["tool"]["importlinter"]


NAMED = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w.-]+\.(?:md|py|toml))(#[\w-]+)?")
SOURCES = ("translator/**/*.py", "scripts/**/*.py", "tests/*.py", "configs/*.toml")


def broken_names(file: Path) -> list[str]:
    """Project files named in `file` (docs/x.md#anchor, configs/x.toml, scripts/x.py, a
    module as translator/… or as its package path, training/trainer.py) that do not exist,
    or whose #anchor is no heading of the page. Names under a tmp or data directory are
    what the code writes, not what the project holds."""
    broken = []
    for name, anchor in NAMED.findall(file.read_text(encoding="utf-8")):
        written = name.split("/")[0] in {"data", "runs", "tmp", "out", "exports", "work", ".."}
        if written or Path(name).stem in {"NAME", "x"}:  # NAME, x: placeholders in usage lines
            continue
        candidates = [ROOT / name, ROOT / "translator" / name, file.parent / name]
        found = next((c for c in candidates if c.exists()), None)
        if found is None:
            broken.append(f"{file.relative_to(ROOT)}: {name} (no such file)")
        elif anchor and found.suffix == ".md" and anchor[1:] not in anchors(found):
            broken.append(f"{file.relative_to(ROOT)}: {name}{anchor} (no heading {anchor})")
    return broken


def test_files_named_in_code_and_configs_exist():
    """A comment or docstring that sends the reader to a page, config or module (say
    `docs/translating.md`) must name one that exists: the link test reads markdown only."""
    files = [ROOT / "pyproject.toml", ROOT / "Makefile"]
    files += [f for pattern in SOURCES for f in sorted(ROOT.glob(pattern))]
    files.remove(Path(__file__).resolve())  # its own examples
    assert len(files) > 100
    broken = [line for file in files for line in broken_names(file)]
    assert not broken, "\n".join(broken)


def test_the_name_checker_finds_a_missing_page_and_anchor(tmp_path, monkeypatch):
    source = ROOT / "translator" / "config.py"
    text = "# docs/translate.md; docs/quality.md#no-such-heading; training/trainer.py\n"
    real = Path.read_text
    fake = lambda self, encoding=None: text if self == source else real(self, encoding=encoding)  # noqa: E731
    monkeypatch.setattr(Path, "read_text", fake)
    assert broken_names(source) == [
        "translator/config.py: docs/translate.md (no such file)",
        "translator/config.py: docs/quality.md#no-such-heading (no heading #no-such-heading)",
    ]


def module_rows() -> set[str]:
    """The paths docs/architecture.md's module table lists (a folder row ends in /)."""
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `(translator/[\w/.]*)` \|", text, re.M))


def test_the_module_table_lists_the_modules_that_exist():
    rows = module_rows()
    modules = {str(p.relative_to(ROOT)) for p in ROOT.glob("translator/**/*.py")}
    modules -= {m for m in modules if m.endswith("__init__.py")}
    unlisted = [m for m in modules if m not in rows and f"{Path(m).parent}/" not in rows]
    assert not unlisted, f"docs/architecture.md's module table misses {sorted(unlisted)}"
    gone = [row for row in rows if not (ROOT / row).exists()]
    assert not gone, f"docs/architecture.md lists modules that do not exist: {gone}"


def results_rows(page: Path) -> dict[str, list[str]]:
    """The rows of the results table (between the markers) by their first cell."""
    text = page.read_text(encoding="utf-8")
    table = text.split("<!-- results:begin -->", 1)[1].split("<!-- results:end -->", 1)[0]
    rows = [line.strip("|").split(" | ") for line in table.strip().splitlines()[2:]]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in rows}


def test_every_readme_result_is_its_homes_figure():
    home = results_rows(ROOT / "docs/quality.md")
    readme = results_rows(ROOT / "README.md")
    assert readme, "README.md has no results table between its markers"
    for label, (_, _, bleu, machine) in readme.items():
        assert label in home, f"README's row {label!r} has no row in docs/quality.md"
        assert f"**{bleu}**" in home[label][2], (label, bleu, home[label][2])
        assert home[label][-1] == machine, (label, machine, home[label][-1])


def prose_sentences(text: str) -> list[str]:
    """The sentences of a page's prose: code blocks, tables and headings left out."""
    text = FENCE.sub("", text)
    lines = [line for line in text.splitlines() if not line.startswith(("|", "#", "<!--"))]
    blocks = re.split(r"\n\s*\n|\n(?=- )", "\n".join(lines))  # paragraphs, list items
    sentences = []
    for block in blocks:
        prose = CODE.sub("code", LINK.sub("link", " ".join(block.split())))
        sentences += [s for s in re.split(r"(?<=[.!?:;])\s+(?=[A-Z(`\[])", prose) if s]
    return sentences


def test_no_readme_sentence_runs_past_60_words():
    long = [s for s in prose_sentences((ROOT / "README.md").read_text()) if len(s.split()) > 60]
    assert not long, long
