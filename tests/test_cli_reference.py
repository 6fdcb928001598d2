"""docs/cli.md is the command-line reference written from the Typer app
(translator/cli/reference.py): written again here, in memory, it must equal the page, so an
option added, removed or reworded shows up as a failing test until `make cli-docs` is run."""

import difflib
from pathlib import Path

import pytest

from translator.cli.reference import reference

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_the_cli_reference_is_what_the_app_says_today():
    written = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    today = reference()
    if written != today:
        diff = difflib.unified_diff(
            written.splitlines(), today.splitlines(), "docs/cli.md", "the CLI today", lineterm=""
        )
        pytest.fail(
            "docs/cli.md is out of date with the CLI's commands and options: run `make cli-docs`"
            "\n" + "\n".join(list(diff)[:40]),
            pytrace=False,
        )


def test_each_command_has_its_section_and_usage_line():
    page = reference()
    for command in ("download", "prepare", "train", "translate", "eval", "serve", "import-hf"):
        assert f"\n## {command}\n\n    translator {command} " in page, command
    assert "- `-i, --input PATH`: File of English text" in page
    assert "`--help`" not in page.split("## download", 1)[1]  # every command has it: said once
