"""`translator translate` without sentences: a prompt on a terminal, or stdin translated as
it arrives — each translation written as soon as its line has been decoded, the lines that
arrived together decoded as one batch."""

from __future__ import annotations

import codecs
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

from translator.errors import UserError

_END = object()  # the reader's last item


def decoded_lines(stream: BinaryIO, source: str = "stdin") -> Iterator[str]:
    """The lines of a byte stream as they arrive, decoded as files are (UTF-8, a BOM on the
    first line dropped, \\r\\n or \\n); a line that is not UTF-8 is one clear error."""
    for number, raw in enumerate(stream, 1):
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{source}: line {number} is not valid UTF-8") from None
        yield text.removesuffix("\n").removesuffix("\r")


def arriving_batches(lines: Iterable[str], limit: int) -> Iterator[list[str]]:
    """Batches of `lines` in order: each waits for one line, then takes the lines already
    read (up to `limit`) without waiting for more. A reader thread does the reading."""
    arrived: queue.Queue = queue.Queue()

    def read() -> None:
        try:
            for line in lines:
                arrived.put(line)
        except Exception as exc:  # noqa: BLE001 - raised again in the consuming thread
            arrived.put(exc)
        arrived.put(_END)

    threading.Thread(target=read, daemon=True).start()
    while True:
        first = arrived.get()
        if first is _END:
            return
        batch = [_line(first)]
        while len(batch) < limit:
            try:
                item = arrived.get_nowait()
            except queue.Empty:
                break
            if item is _END:
                yield batch
                return
            batch.append(_line(item))
        yield batch


def _line(item):
    if isinstance(item, Exception):
        raise item
    return item


def translate_stream(translate: Callable, lines: Iterable[str], write, limit: int) -> int:
    """Translate `lines` batch by batch as they arrive; `write` gets each batch's lines and
    their outputs. Returns how many lines were translated."""
    count = 0
    for batch in arriving_batches(lines, limit):
        write(batch, translate(batch))
        count += len(batch)
    return count


def prompt_loop(translate: Callable, ask=input, say=print) -> None:
    """One English line in, its translation out, until end of input (Ctrl-D)."""
    say("English in, Chinese out; Ctrl-D to quit.")
    while True:
        try:
            line = ask("en> ")
        except EOFError:
            say()
            return
        say(translate([line])[0])
