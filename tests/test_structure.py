"""The package's shape, as docs/architecture.md states it: every module's file name is its
own (a reader who meets `pipeline.py` knows which one), and no class of the text path
gathers every feature's methods."""

from __future__ import annotations

import ast
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
