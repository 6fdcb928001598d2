"""scripts/ is a package of its own: each script imports `translator` as installed and its
shared helpers from scripts/common.py, edits no module path, starts from any directory,
and is listed with what it measures in docs/architecture.md."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "scripts").glob("*.py") if p.name != "common.py")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_script_starts_from_any_directory(script, tmp_path):
    result = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage:")


def test_no_script_edits_the_module_path():
    for path in (ROOT / "scripts").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "sys.path" not in text and "noqa: E402" not in text, path


def test_the_architecture_page_lists_every_script():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for path in (ROOT / "scripts").rglob("*"):
        if path.suffix in (".py", ".sh"):
            assert f"`scripts/{path.relative_to(ROOT / 'scripts')}`" in page, path
