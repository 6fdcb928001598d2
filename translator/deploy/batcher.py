"""The server's queue: requests in, batches to the decoder out, taken in turn.

A batch takes one text from each waiting request with the first's settings in turn, up to
`max_sentences` sentences, and those requests go to the back of the line: a long document
does not hold a short request back, and one whose client went away costs no more decoder
time. A batch that fails is decoded again request by request, so a bad request fails alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from translator.deploy.decoder import Settings, best
from translator.deploy.limits import BadRequest


class Decoder(Protocol):
    """What the Batcher decodes with: decoder.py's DecoderProcess or LocalDecoder."""

    def decode(self, sentences: list[str], settings: Settings) -> tuple[list, int]: ...


@dataclass(eq=False)
class _Pending:
    """A request in the queue: its texts, what each costs, the answers so far."""

    texts: list[str]
    costs: list[int]
    settings: Settings
    done: asyncio.Future = field(repr=False)
    outputs: list = field(default_factory=list)
    taken: int = 0  # texts taken into batches so far (they are taken in order)
    answered: int = 0
    left: int = 0  # the cost of the texts not yet taken
    served: float = 0.0  # when a batch last took from it (first: when it came)


@dataclass(frozen=True)
class _Slice:
    """Texts start:stop of one request, in one batch."""

    request: _Pending
    start: int
    stop: int

    @property
    def texts(self) -> list[str]:
        return self.request.texts[self.start : self.stop]


class Batcher:
    """The queue and the one decode at a time (see the module docstring)."""

    def __init__(
        self,
        decoder: Decoder,
        wait: float,
        max_sentences: int,
        on: bool,
        max_queue: int = 1 << 30,
        on_decode=lambda sentences, tokens, lost, appended: None,
    ):
        self.decoder = decoder
        self.on_decode = on_decode  # told each decode's sentences, tokens, spans lost, appended
        self.max_queue = max_queue
        self.max_sentences = max_sentences  # a batch's sentences
        self.shared = on  # whether a batch takes from several requests
        self.wait = wait if on else 0.0  # how long the first of a batch waits for others
        self.queued = 0  # sentences waiting, not yet taken into a batch
        self.waiting: list[_Pending] = []  # in turn: the next batch starts with the first
        self.arrived = asyncio.Event()
        self.executor = ThreadPoolExecutor(max_workers=1)  # the model decodes one batch at a time
        self.decodes = 0  # how many decodes ran (for tests and /health)
        self.decoding_since: float | None = None

    async def translate(
        self,
        texts: list[str],
        settings: Settings,
        costs: list[int] | None = None,
        admitted: bool = False,
    ) -> list:
        """The hypotheses of each of `texts`, once decoded; a 503 at once when the queue has
        no room for their `costs` (sentences, one each by default), unless `admitted` (a
        document's next part). Cancelling the call drops the texts not yet decoding."""
        costs = [1] * len(texts) if costs is None else list(costs)
        if not admitted and (refused := self.refusal(sum(costs))):
            raise refused
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        request = _Pending(texts, costs, settings, loop.create_future(), [None] * len(texts))
        request.left, request.served = sum(costs), time.monotonic()
        request.done.add_done_callback(lambda _: self._forget(request))
        self.waiting.append(request)
        self.queued += request.left
        self.arrived.set()
        return await request.done

    def refusal(self, sentences: int) -> BadRequest | None:
        """The 503 for `sentences` more when the queue has no room for them, else None."""
        if self.queued + sentences <= self.max_queue:
            return None
        message = (
            f"busy: {self.queued} sentences are waiting (serve.max_queue {self.max_queue}); "
            "try again shortly"
        )
        return BadRequest(503, message, {"Retry-After": "1"})

    def busy(self) -> float:
        """Seconds the decoder has been on the batch it decodes, or that a waiting request
        has gone without a batch taking from it, whichever is longer (0: idle)."""
        now = time.monotonic()
        running = now - self.decoding_since if self.decoding_since is not None else 0.0
        return max([running, *(now - request.served for request in self.waiting)])

    async def run(self) -> None:
        while True:
            await self._gathered()
            await self._decode(self._take())

    async def _gathered(self) -> None:
        """Until a request waits; when the decoder was idle, up to `wait` more for others to
        arrive, or until there is a batch's worth."""
        if self.waiting:
            return
        while not self.waiting:
            self.arrived.clear()
            await self.arrived.wait()
        deadline = time.monotonic() + self.wait
        while self.queued < self.max_sentences and (left := deadline - time.monotonic()) > 0:
            self.arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), left)

    def _take(self) -> list[_Slice]:
        """The next batch (see the module docstring); its requests go to the back of the
        line, or leave it once all their texts are taken."""
        if not self.waiting:
            return []
        settings = self.waiting[0].settings
        group = [r for r in self.waiting if r.settings == settings] if self.shared else []
        group = group or self.waiting[:1]
        starts = [request.taken for request in group]
        room, took = self.max_sentences, True
        while room > 0 and took:
            room, took = self._take_round(group, room)
        pairs = zip(group, starts, strict=True)
        taken = [_Slice(r, start, r.taken) for r, start in pairs if r.taken > start]
        now = time.monotonic()
        for piece in taken:
            piece.request.served = now
        served = {id(piece.request) for piece in taken}
        rest = [p.request for p in taken if p.request.taken < len(p.request.texts)]
        self.waiting = [r for r in self.waiting if id(r) not in served] + rest
        return taken

    def _take_round(self, group: list[_Pending], room: int) -> tuple[int, bool]:
        """One text from each request of `group` in turn whose next text fits in `room` (any,
        while the batch is empty): the room left, and whether any was taken."""
        took = False
        for request in group:
            if request.taken == len(request.texts):
                continue
            cost = request.costs[request.taken]
            if cost > room and room < self.max_sentences:
                continue
            request.taken += 1
            request.left -= cost
            self.queued -= cost
            room -= cost
            took = True
            if room <= 0:
                break
        return room, took

    async def _decode(self, batch: list[_Slice]) -> None:
        """Decode `batch` and hand each request its answers; if it fails and holds several
        requests, each is decoded again alone."""
        live = [s for s in batch if not s.request.done.done()]  # a cancelled one is dropped
        if not live:
            return
        try:
            texts = [t for s in live for t in s.texts]
            outputs = await self._decoded(texts, live[0].request.settings)
        except Exception as exc:  # noqa: BLE001 - handed to the request, or tried alone
            if len(live) == 1:
                if not live[0].request.done.done():
                    live[0].request.done.set_exception(exc)
                return
            for alone in live:
                await self._decode([alone])
            return
        start = 0
        for s in live:
            self._answer(s, outputs[start : start + s.stop - s.start])
            start += s.stop - s.start
            await asyncio.sleep(0)  # one answer a turn of the loop: /health goes between

    async def _decoded(self, texts: list[str], settings: Settings) -> list:
        """One decode of `texts` with `settings`, in the worker thread."""
        loop = asyncio.get_running_loop()
        self.decoding_since = time.monotonic()
        try:
            decode = self.decoder.decode
            outputs, tokens = await loop.run_in_executor(self.executor, decode, texts, settings)
        finally:
            self.decoding_since = None
        self.decodes += 1
        top = best(outputs)
        lost = sum(len(h.lost) for h in top)
        self.on_decode(texts, tokens, lost, sum(len(h.appended) for h in top))
        return outputs

    def _answer(self, piece: _Slice, outputs: list) -> None:
        request = piece.request
        if request.done.done():  # cancelled while it was decoding: nobody waits for it
            return
        request.outputs[piece.start : piece.stop] = outputs
        request.answered += len(outputs)
        if request.answered == len(request.texts):
            request.done.set_result(request.outputs)

    def _forget(self, request: _Pending) -> None:
        """A request answered, failed or cancelled: its texts not yet taken leave the queue."""
        if request in self.waiting:
            self.waiting.remove(request)
        self.queued -= request.left
        request.left = 0
