"""The package's shape, as docs/architecture.md states it: every module's file name is its
own (a reader who meets `pipeline.py` knows which one), and no class of the text path
gathers every feature's methods."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "translator"


def test_no_two_modules_share_a_file_name():
    names = Counter(p.name for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")
    assert [name for name, count in names.items() if count > 1] == []


def test_no_class_of_the_inference_package_has_more_than_twenty_methods():
    counts = {}
    for path in (PACKAGE / "inference").glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
                counts[f"{path.name}:{node.name}"] = len(methods)
    assert counts and max(counts.values()) <= 20, counts


def test_the_architecture_page_lists_the_modules_that_exist():
    """docs/architecture.md's module table names every module of the package (cli/ as one
    row) and no module that is gone."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = {
        p.relative_to(PACKAGE.parent).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py") and "cli" not in p.parts
    }
    named = set(re.findall(r"`(translator/[\w/]+\.py)`", page))
    gone = [name for name in named if not (PACKAGE.parent / name).is_file()]
    assert sorted(modules - named) == [] and gone == []
