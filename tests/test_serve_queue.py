"""The server's queue (translator/deploy/batcher.py) against requests that would take the
decoder from everybody else: a long document shares the decoder with a short request that
comes after it, a request that leaves stops costing decoder time between batches, a request
that fails inside a batch fails alone, and the decoder's busy time is what /ready reads.
In-process, with a decoder that records what it is given: the counts are exact."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("fastapi")
from translator.deploy.batcher import Batcher  # noqa: E402
from translator.deploy.decoder import Settings  # noqa: E402
from translator.inference.hypothesis import Hypothesis  # noqa: E402

PLAIN = Settings(beam=1, split=False)


class Recording:
    """A decoder: records each batch, takes `seconds` over it, fails on "poison"."""

    def __init__(self, seconds: float = 0.0):
        self.batches: list[list[str]] = []
        self.seconds = seconds

    def decode(self, texts: list[str], settings: Settings) -> tuple[list, int]:
        self.batches.append(list(texts))
        time.sleep(self.seconds)
        if "poison" in texts:
            raise RuntimeError("the decoder cannot take this text")
        return [[Hypothesis(text.upper(), 0.0)] for text in texts], len(texts)


async def started(decoder: Recording) -> None:
    """Until the decoder has been given its first batch."""
    while not decoder.batches:
        await asyncio.sleep(0.005)


def batcher_for(decoder, batch: int = 4, **options) -> Batcher:
    return Batcher(decoder, wait=0.0, max_sentences=batch, on=True, **options)


def test_a_short_request_is_decoded_in_the_batch_after_a_long_document_starts():
    decoder = Recording(seconds=0.1)

    async def scenario():
        batcher = batcher_for(decoder, batch=4)
        runner = asyncio.create_task(batcher.run())
        document = asyncio.ensure_future(
            batcher.translate([f"d{i}" for i in range(20)], PLAIN, admitted=True)
        )
        await started(decoder)  # the document's first batch is decoding
        short = await batcher.translate(["short"], PLAIN)
        await document
        runner.cancel()
        return short

    short = asyncio.run(scenario())
    assert short == [[Hypothesis("SHORT", 0.0)]]
    # in the second batch, beside the document's next texts, not after its five batches
    assert sorted(decoder.batches[1]) == ["d4", "d5", "d6", "short"]
    assert sum(map(len, decoder.batches)) == 21  # nothing decoded twice, nothing lost


def test_requests_waiting_together_take_turns_within_a_batch():
    decoder = Recording()

    async def scenario():
        batcher = batcher_for(decoder, batch=6)
        runner = asyncio.create_task(batcher.run())
        asked = [[f"{name}{i}" for i in range(6)] for name in "abc"]
        answers = await asyncio.gather(*(batcher.translate(texts, PLAIN) for texts in asked))
        runner.cancel()
        return asked, answers

    asked, answers = asyncio.run(scenario())
    assert answers == [[[Hypothesis(t.upper(), 0.0)] for t in texts] for texts in asked]
    assert sorted(decoder.batches[0]) == ["a0", "a1", "b0", "b1", "c0", "c1"]  # two each


def test_a_text_costs_its_sentences_and_a_batch_holds_at_most_its_share():
    decoder = Recording()

    async def scenario():
        batcher = batcher_for(decoder, batch=4)
        runner = asyncio.create_task(batcher.run())
        await batcher.translate(["three", "three", "one", "five"], PLAIN, costs=[3, 3, 1, 5])
        runner.cancel()

    asyncio.run(scenario())
    # three sentences, then three and one, then five alone (more than a batch: by itself)
    assert decoder.batches == [["three"], ["three", "one"], ["five"]]


def test_a_request_that_leaves_costs_no_decoder_time_after_the_batch_it_was_in():
    decoder = Recording(seconds=0.02)

    async def scenario():
        batcher = batcher_for(decoder, batch=2)
        runner = asyncio.create_task(batcher.run())
        gone = asyncio.ensure_future(batcher.translate([f"g{i}" for i in range(20)], PLAIN))
        await started(decoder)
        gone.cancel()  # what limits.py does when its client leaves or its time runs out
        kept = await batcher.translate(["kept"], PLAIN)
        runner.cancel()
        return kept, batcher.queued, batcher.waiting

    kept, queued, waiting = asyncio.run(scenario())
    decoded = [text for batch in decoder.batches for text in batch]
    assert kept == [[Hypothesis("KEPT", 0.0)]]
    assert len(decoded) <= 5  # the batch decoding when it left (and one more at most)
    assert queued == 0 and waiting == []


def test_a_request_that_fails_in_a_batch_fails_alone():
    decoder = Recording()

    async def scenario():
        batcher = batcher_for(decoder, batch=8)
        runner = asyncio.create_task(batcher.run())
        asked = [["fine", "also fine"], ["poison"], ["good"]]
        answers = await asyncio.gather(
            *(batcher.translate(texts, PLAIN) for texts in asked), return_exceptions=True
        )
        runner.cancel()
        return answers

    answers = asyncio.run(scenario())
    assert answers[0] == [[Hypothesis("FINE", 0.0)], [Hypothesis("ALSO FINE", 0.0)]]
    assert isinstance(answers[1], RuntimeError)
    assert answers[2] == [[Hypothesis("GOOD", 0.0)]]
    assert sorted(decoder.batches[0]) == ["also fine", "fine", "good", "poison"]  # together
    assert decoder.batches[1:] == [["fine", "also fine"], ["poison"], ["good"]]  # then alone


def test_busy_is_the_longest_batch_or_wait_and_zero_when_idle():
    decoder = Recording(seconds=0.2)

    async def scenario():
        batcher = batcher_for(decoder, batch=1)
        idle = batcher.busy()
        runner = asyncio.create_task(batcher.run())
        both = asyncio.gather(batcher.translate(["a"], PLAIN), batcher.translate(["b"], PLAIN))
        await asyncio.sleep(0.1)
        during = batcher.busy()
        await both
        after = batcher.busy()
        runner.cancel()
        return idle, during, after

    idle, during, after = asyncio.run(scenario())
    assert idle == 0.0 and after == 0.0
    assert 0.05 < during < 1.0  # "a" decoding (and "b" waiting) for about 0.1 s
