"""scripts/ is a package of its own: the benchmarks and checks a user reruns at its top (17
Python files at most, its helpers counted), the studies behind a decision in
scripts/studies/. Each script imports `translator` as installed and its shared helpers from
scripts/common.py and step_measures.py, edits no module path, imports no other script,
starts from any directory, is listed with what it measures in docs/architecture.md, and is
cited by another page (the figure it produced, the check it runs): else it has no keep to
earn."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELPERS = ("common.py", "step_measures.py")  # imported by the scripts, not run
TOP = sorted((ROOT / "scripts").glob("*.py"))  # the benchmarks and checks, and the helpers
STUDIES = sorted((ROOT / "scripts" / "studies").glob("*.py"))
SCRIPTS = [p for p in TOP if p.name not in HELPERS] + STUDIES
MOST_AT_THE_TOP = 17


# Each script run as `python scripts/NAME.py --help` runs it (its directory first on the
# module path, another working directory), but all in one process: PyTorch is imported once
# rather than once a script (about a minute of CPU time less).
RUN_EACH = """
import contextlib, io, runpy, sys
paths, failures = sys.argv[1:], []
for path in paths:
    sys.argv, sys.path[0] = [path, "--help"], path.rsplit("/", 1)[0]
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as exit:
        code = exit.code or 0
    except Exception as error:
        code = repr(error)
    if code != 0 or not out.getvalue().startswith("usage:"):
        failures.append(f"{path}: exit {code}: {err.getvalue()[-1000:]}")
print("\\n".join([*failures, f"ran {len(paths)}"]))
"""


def test_each_script_starts_from_any_directory(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", RUN_EACH, *map(str, SCRIPTS)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == f"ran {len(SCRIPTS)}\n", result.stdout


def test_the_top_of_scripts_holds_what_a_user_reruns():
    assert len(TOP) <= MOST_AT_THE_TOP, [p.name for p in TOP]
    assert STUDIES and not any(p.name.startswith("study") for p in TOP)
    folders = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "scripts").rglob("*.py")}
    assert folders == {"scripts", "scripts/studies", "scripts/reference"}


def test_no_script_edits_the_module_path():
    for path in (ROOT / "scripts").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "sys.path" not in text and "noqa: E402" not in text, path


def test_no_script_imports_another():
    """What two scripts share is in the helpers (a study reads them by path), not in either."""
    scripts = {p.stem for p in SCRIPTS}
    for path in SCRIPTS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {name.split(".")[0] for name in names} & (scripts - {path.stem}), path


def test_the_architecture_page_lists_every_script():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for path in (ROOT / "scripts").rglob("*"):
        if path.suffix in (".py", ".sh"):
            assert f"`scripts/{path.relative_to(ROOT / 'scripts')}`" in page, path


def test_every_script_is_cited_beyond_the_list_of_scripts():
    pages = [p for p in (ROOT / "docs").glob("*.md") if p.name != "architecture.md"]
    text = "".join(p.read_text(encoding="utf-8") for p in [*pages, ROOT / "Makefile"])
    for path in (ROOT / "scripts").rglob("*"):
        if path.suffix in (".py", ".sh"):
            assert f"scripts/{path.relative_to(ROOT / 'scripts')}" in text, path
