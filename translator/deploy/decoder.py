"""Where `translator serve` decodes: a process of its own, fed one batch at a time through
a pipe, so that the HTTP process (parsing, limits, refusals, metrics) cannot take the
decoder's time, however many requests it refuses (measured in docs/deploy.md).

It ignores SIGINT and SIGTERM, which reach the whole process group while the HTTP process
still needs it to finish what it admitted, and exits when the pipe closes. Should it die,
the batch it held is answered 503 and another is started for the next.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from translator.config import Config
from translator.deploy.limits import BadRequest
from translator.errors import UserError
from translator.inference.hypothesis import Hypothesis
from translator.runtime import return_freed_memory

log = logging.getLogger(__name__)
RESTART_RETRY_S = "5"  # Retry-After for the batch a dead decoding process held
IDLE_S = 1.0  # a decoding process with nothing to do for this long returns its free memory


@dataclass(frozen=True)
class Settings:
    """What a request may choose about decoding; requests that agree decode together.
    `glossary`: the request's own entries (English, Chinese), laid over the server's."""

    beam: int
    split: bool
    nbest: int = 0
    glossary: tuple[tuple[str, str], ...] = ()


BLANK = Hypothesis("", 0.0)  # a blank text's best translation: it has no hypotheses


def best(outputs: list[list]) -> list[Hypothesis]:
    """Each text's best hypothesis, of what `decode` returns (BLANK for a blank text)."""
    return [hypotheses[0] if hypotheses else BLANK for hypotheses in outputs]


# Warming up decodes texts of a few lengths in batches of a few sizes, so that the first
# requests meet engines already made and kernels already built for shapes like theirs.
WARM_UP_TEXT = (
    "The quick brown fox jumps over the lazy dog near the river bank, and then it runs "
    "back home before the sun goes down behind the hills."
)
WARM_UP_BATCHES = (1, 2, 3, 8, 32)


def warm_up(decoder: LocalDecoder, settings: list[Settings], batch_size: int) -> float:
    """Decode WARM_UP_BATCHES (each at most `batch_size` texts, from one word of WARM_UP_TEXT
    to all of it) with each of `settings`: the seconds it took."""
    began, words = time.perf_counter(), WARM_UP_TEXT.split()
    for each in settings:
        for rows in (min(n, batch_size) for n in WARM_UP_BATCHES):
            ends = [len(words) * (i + 1) // rows for i in range(rows)]
            decoder.decode([" ".join(words[: max(end, 1)]) for end in ends], each)
    return time.perf_counter() - began


def warmed(decoder: LocalDecoder, config: Config) -> float:
    """The decoding process's warm-up (`serve.warm_up`), with the default settings and
    greedy: its seconds. A failure is logged: a request that meets it again is told."""
    if not config.serve.warm_up:
        return 0.0
    beams = dict.fromkeys([config.decode.beam, 1])
    settings = [Settings(beam, config.decode.split) for beam in beams]
    try:
        return warm_up(decoder, settings, config.decode.batch_size)
    except Exception as exc:  # noqa: BLE001
        log.warning("warming up failed: %s", exc)
        return 0.0


class DecodeFailed(Exception):
    """The decoder raised `kind` (not a UserError): the client is told only its kind."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


class LocalDecoder:
    """Decoding in the calling thread with one loaded translator (anything with `with_decode`
    and `translate`); the engine for each set of settings is made once."""

    def __init__(self, translator):
        self.translator = translator
        self.engines: dict[Settings, Any] = {}

    def decode(self, sentences: list[str], settings: Settings) -> tuple[list, int]:
        """Each text's hypotheses (nbest, or its best) and the texts' source tokens (/metrics)."""
        decoding = replace(settings, glossary=())
        if decoding not in self.engines:
            changes = asdict(decoding) | {"nbest": max(1, settings.nbest)}
            del changes["glossary"]
            self.engines[decoding] = self.translator.with_decode(**changes)
        engine = self.engines[decoding]
        if settings.glossary:
            outputs = engine.translate(sentences, glossary=dict(settings.glossary))
        else:
            outputs = engine.translate(sentences)
        tokenizer = getattr(self.translator, "src_tok", None)
        tokens = sum(map(len, tokenizer.encode(sentences))) if tokenizer else 0
        return outputs, tokens


def model_identity(translator, checkpoint: Path, engine_setting: str) -> dict[str, str]:
    """The model an opened translator decodes, by name and never by path (what /health and
    /info say); with an engine named that reads its own directory (`--engine ctranslate2
    --model DIR`), the run and checkpoint it was exported from."""
    from translator.model.checkpoint import digest

    about = translator.engine.about
    if translator.engine.reads_dir:
        sha256 = about.sha256  # "" from an export older than the record
        if engine_setting != "auto":
            checkpoint = about.checkpoint or Path("")
    else:
        sha256 = digest(checkpoint)
    owner = checkpoint.parent  # its run: the directory above checkpoints/, else this one
    return {
        "run": (owner.parent if owner.name == "checkpoints" else owner).name,
        "checkpoint": checkpoint.name,
        "sha256": sha256[:12],
        "engine": about.name,
        "precision": about.precision,
        "decodes_from": Path(about.origin).name,
    }


def no_setup() -> None:
    """The decoding process's set-up when none is given."""


class DecoderProcess:
    """The decoding process, seen from the HTTP process. `decode` blocks until the batch is
    done (the server calls it from one worker thread); it is safe from any thread."""

    def __init__(self, config: Config, checkpoint: Path, setup: Callable[[], None] | None = None):
        # setup: run first in the decoding process (a module-level function: it is pickled)
        self.config, self.checkpoint, self.setup = config, checkpoint, setup or no_setup
        self.lock = threading.Lock()
        self.warm = threading.Event()  # set once the process has warmed up: `ready`
        self.warm_s = 0.0  # how long its warm-up took
        self._start()  # loaded before the server listens: a bad model is one clear error
        self.lock.acquire()  # released by the thread once warm: no decode comes before
        threading.Thread(target=self._warmed, args=(True,), daemon=True).start()

    @property
    def ready(self) -> bool:
        """Loaded and warmed up: the first request is as fast as the ones after it."""
        return self.warm.is_set()

    def decode(self, sentences: list[str], settings: Settings) -> tuple[list, int]:
        with self.lock:
            if self.process is None:
                self._restart()
            try:
                self.connection.send((sentences, settings))
                reply = self.connection.recv()
            except (EOFError, OSError):
                code = self._reap()
                log.warning("the decoding process stopped (exit code %s): starting another", code)
                raise BadRequest(
                    503,
                    f"the decoding process stopped (exit code {code}) and is being restarted; "
                    "try again shortly",
                    {"Retry-After": RESTART_RETRY_S},
                ) from None
        if reply[0] == "ok":
            return reply[1], reply[2]
        _, kind, message, user = reply
        raise UserError(message) if user else DecodeFailed(kind)

    def close(self, timeout: float = 30.0) -> None:
        """Close the pipe and wait for the process to finish its batch and exit."""
        with self.lock:
            if self.process is not None:
                self.connection.close()
                self.process.join(timeout)
                self._reap()

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")  # CUDA and torch's threads need spawn
        self.connection, theirs = context.Pipe()
        self.process = context.Process(
            target=serve_decoder,
            args=(theirs, self.config, self.checkpoint, self.setup),
            name="translator-decoder",
            daemon=True,
        )
        self.process.start()
        theirs.close()  # ours is then the only other end: its death reads as EOF here
        try:
            reply = self.connection.recv()
        except (EOFError, OSError):
            reply = ("failed", f"the decoding process exited with code {self._reap()}")
        except BaseException:  # Ctrl-C while it loads: it ignores signals, so end it here
            self._reap()
            raise
        if reply[0] != "ready":
            self._reap()
            raise UserError(reply[1])
        self.warm.clear()  # until its warm-up ends
        # what it decodes from (a path), the server glossary's entries, the model by name
        self.origin, self.glossary, self.model = reply[1:]

    def _restart(self) -> None:
        """Start another decoding process once one stopped, and wait for its warm-up; a 503
        if it cannot start (why, which may name files, goes to the log, not to clients)."""
        try:
            self._start()
        except UserError as exc:
            log.warning("the decoding process could not be started again: %s", exc)
            raise BadRequest(
                503,
                "the decoding process stopped and could not be started again (the server's "
                "log says why); try again later",
                {"Retry-After": RESTART_RETRY_S},
            ) from None
        self._warmed()

    def _warmed(self, release: bool = False) -> None:
        """Wait for the decoding process to say it is warm (`release`: then release the
        constructor's lock); should it die warming up, the next decode starts another."""
        try:
            reply = self.connection.recv()
            if reply[0] == "warm":
                self.warm_s = reply[1]
                self.warm.set()
        except (EOFError, OSError):
            pass
        finally:
            if release:
                self.lock.release()

    def _reap(self) -> int | None:
        """End the process if it still runs; its exit code. The next decode starts another."""
        process, self.process = self.process, None
        self.connection.close()
        if process.is_alive():
            process.kill()
        process.join()
        return process.exitcode


def serve_decoder(connection, config: Config, checkpoint: Path, setup: Callable[[], None]):
    """The decoding process: load the model, then decode what arrives until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    setup()
    try:
        from translator.inference.text import Translator

        translator = Translator.open(config, checkpoint)
        entries = len(translator.glossary or ())  # loaded now: a bad file stops the start
        model = model_identity(translator, checkpoint.absolute(), config.decode.engine)
        decoder = LocalDecoder(translator)
    except Exception as exc:  # noqa: BLE001 - reported to the HTTP process as its one line
        connection.send(("failed", str(exc) if isinstance(exc, UserError) else repr(exc)))
        return
    log.info(translator.model_line)
    log.info(translator.engine_line)
    connection.send(("ready", str(translator.engine.about.origin), entries, model))
    connection.send(("warm", warmed(decoder, config)))
    while True:
        try:
            if not connection.poll(IDLE_S):
                return_freed_memory()  # idle: what a peak took goes back to the system
                connection.poll(None)
            sentences, settings = connection.recv()
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", *decoder.decode(sentences, settings))
        except Exception as exc:  # noqa: BLE001 - handed to the requests of this batch
            reply = ("error", type(exc).__name__, str(exc), isinstance(exc, UserError))
        try:
            connection.send(reply)
        except OSError:
            return
