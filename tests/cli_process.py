"""`translator …` (or `python scripts/NAME.py …`) in a process of its own, as a user runs
it, without paying for PyTorch's import each time (2.5 s on a 2-core CPU, more than most
commands take on the tiny data).

Each command runs in a fresh process forked from a server that imported PyTorch and the
translator's modules once, and nothing else (multiprocessing's forkserver, one per test
worker): its own working directory, environment, stdin, stdout and stderr (files, as a
pipe would be), `translator.cli.main()` (or the script, as `python` runs it) with the
arguments, its exit handlers, and the exit code it ends with. What differs from a new
interpreter: the modules are imported before the environment is set, so variables read at
import time are the test worker's (OMP_NUM_THREADS is applied again). `fresh=True` starts a
real interpreter instead (tests/test_cli.py and test_scripts.py keep doing so), as `run`
does where there is no forkserver (Windows).
"""

from __future__ import annotations

import atexit
import locale
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

PRELOAD = [
    "torch",
    "translator.cli",
    "translator.corpus.preparer",
    "translator.training.trainer",
    "translator.inference.torch_engine",
    "translator.evaluation.evaluator",
    "translator.deploy.hf",
    # the hf extra's models (a module that is not installed is skipped by the preload)
    "transformers.models.marian.modeling_marian",
    "transformers.models.pegasus.modeling_pegasus",
    "transformers.models.marian.tokenization_marian",
]
_context = None


def run(
    args: list[str],
    cwd: Path,
    stdin: str | None,
    env: dict,
    timeout: float,
    fresh: bool = False,
    script: Path | None = None,
) -> subprocess.CompletedProcess:
    """`translator ARGS` (or `python SCRIPT ARGS`) run in `cwd` with environment `env`; its
    output as text."""
    if fresh or "forkserver" not in multiprocessing.get_all_start_methods():
        command = [sys.executable, *([str(script)] if script else ["-m", "translator"]), *args]
        return subprocess.run(
            command, cwd=cwd, input=stdin, env=env, capture_output=True, text=True, timeout=timeout
        )
    return Forked(args, cwd, stdin, env, script).result(timeout)


class Forked:
    """`translator ARGS` (or `python SCRIPT ARGS`) started in a forked process, with what a
    `subprocess.Popen` gives (pid, poll, wait, terminate, kill; stderr in the file
    `stderr`); `result` gives what `subprocess.run` would have."""

    def __init__(
        self, args: list[str], cwd: Path, stdin: str | None, env: dict, script: Path | None = None
    ):
        self.command = [str(script) if script else "translator", *args]
        self.encoding = locale.getpreferredencoding(False)
        self.folder = tempfile.TemporaryDirectory(prefix="cli-")
        self.files = [Path(self.folder.name, f) for f in ("stdin", "stdout", "stderr")]
        self.files[0].write_text(stdin or "", encoding=self.encoding)
        self.stderr = self.files[2]
        paths = [str(f) for f in self.files]
        self.process = forkserver().Process(
            target=_main, args=(self.command, str(cwd), dict(env), paths, self.encoding)
        )
        self.process.start()
        self.pid = self.process.pid

    def poll(self) -> int | None:
        return self.process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired(self.command, timeout or 0)
        return self.process.exitcode

    def terminate(self) -> None:
        self.process.terminate()

    def kill(self) -> None:
        self.process.kill()

    def result(self, timeout: float) -> subprocess.CompletedProcess:
        try:
            code = self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.join()
            raise
        out, err = (f.read_text(encoding=self.encoding, errors="replace") for f in self.files[1:])
        self.folder.cleanup()
        return subprocess.CompletedProcess(self.command, code, out, err)


def forkserver():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _main(command: list[str], cwd: str, env: dict, files: list[str], encoding: str):
    """In the forked process: become `translator ARGS` (or `python SCRIPT ARGS` for a script
    path) and exit as it would."""
    name, args = command[0], command[1:]
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    modes = (os.O_RDONLY, write, write)
    for fd, (path, flags) in enumerate(zip(files, modes, strict=True)):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115 - the process's own
    sys.stdout = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stderr = open(  # noqa: SIM115
        2, "w", encoding=encoding, errors="backslashreplace", buffering=1, closefd=False
    )
    if threads := env.get("OMP_NUM_THREADS"):  # read at start-up by a new interpreter
        import torch

        torch.set_num_threads(int(threads))
    sys.argv = [name, *args]
    code = 0
    try:
        if name == "translator":
            from translator.cli import main

            main()
        else:
            _as_python_runs(name)
            runpy.run_path(name, run_name="__main__")
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:  # noqa: BLE001 - as the interpreter reports an uncaught error
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def _as_python_runs(script: str) -> None:
    """The module path `python SCRIPT` has: the script's folder first, and none of the
    tests' own modules (tests/reference.py would shadow scripts/reference/)."""
    tests = Path(__file__).resolve().parent
    kept = [p for p in sys.path if p and Path(p).resolve() != tests]
    sys.path[:] = [str(Path(script).resolve().parent), *kept]
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").resolve().parent == tests:
            del sys.modules[name]


def _exit_code(code: object) -> int:
    """What the interpreter exits with for SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
