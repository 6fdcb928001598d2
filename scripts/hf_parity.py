"""One checkpoint exported with `translator export --format hf`, its test split translated
greedily by our engine and by transformers' `generate(num_beams=1)` in the same run: how
many sentences come out identical, and each engine's sentences per second (ours ÷ theirs),
with the same threads and batch size. The figures in docs/deploy.md come from:

    python scripts/hf_parity.py runs/tatoeba-cpu/checkpoints/average5.pt \\
        --data data/prepared/tatoeba-3k-ph3

Both read the sentences as `translate` gives them to the model (normalised; the decoding
levers decode.recase and decode.final_mark and the guards decode.digit_guard and
decode.span_guard off, which transformers lacks; a model trained with data.placeholders is
given each sentence's protected spans as ⦅n⦆, and each ⦅n⦆ of transformers' output is
restored as ours is) and may write the model's positions less one; transformers is not
told to stop early otherwise. The export goes to a temporary directory.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from translator.data import spans
from translator.data.layout import read_references
from translator.data.normalization import normalize_en
from translator.deploy.hf import export_hf, require_transformers
from translator.inference.torch_engine import Translator
from translator.model.rundir import checkpoint_in


def our_engine(source: Path, batch: int) -> Translator:
    """Our engine, greedy, with what transformers lacks switched off."""
    engine = Translator.from_checkpoint(source, "cpu", precision="fp32")  # as transformers
    return engine.with_decode(
        beam=1,
        batch_size=batch,
        recase=False,
        final_mark=False,
        digit_guard=False,
        span_guard=False,
        split=False,
        max_len_a=0.0,
        max_len_b=engine.model.model_cfg.max_positions - 1,
    )


def ours(engine: Translator, sentences: list[str]) -> tuple[list[str], float]:
    start = time.perf_counter()
    out = engine.translate(sentences)
    return out, time.perf_counter() - start


def theirs(
    directory: Path, engine: Translator, sentences: list[str], batch: int
) -> tuple[list[str], float]:
    """Batches of `batch` sentences in length order, as ours are, each padded; each given
    as our engine gives it to the model (its spans as ⦅n⦆, restored in the output)."""
    transformers = require_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(directory).eval()
    masked = [engine.for_model(s) for s in sentences]
    sentences = [text for text, _ in masked]
    lengths = [len(ids) for ids in tokenizer(sentences)["input_ids"]]
    order = sorted(range(len(sentences)), key=lengths.__getitem__)
    out = [""] * len(sentences)
    start = time.perf_counter()
    with torch.inference_mode():
        for at in range(0, len(order), batch):
            rows = order[at : at + batch]
            inputs = tokenizer([sentences[i] for i in rows], return_tensors="pt", padding=True)
            generated = model.generate(**inputs, num_beams=1, do_sample=False)
            texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
            for i, text in zip(rows, texts, strict=True):
                out[i] = spans.unmask(" ".join(text.split()), masked[i][1]).text
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="A checkpoint, or a run directory.")
    parser.add_argument("--data", type=Path, required=True, help="A prepared directory.")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch", type=int, default=64, help="Sentences per batch, both.")
    args = parser.parse_args(argv)
    source = checkpoint_in(args.checkpoint)
    sentences = [normalize_en(s) for s in read_references(args.data, args.split)[0]]
    with tempfile.TemporaryDirectory() as tmp:
        directory, architecture = export_hf(source, Path(tmp) / "hf")
        engine = our_engine(source, args.batch)
        mine, my_seconds = ours(engine, sentences)
        their, their_seconds = theirs(directory, engine, sentences, args.batch)
    same = sum(a == b for a, b in zip(mine, their, strict=True))
    n = len(sentences)
    print(
        f"{source} as {architecture}, {n:,} sentences of {args.data}/{args.split}, greedy, "
        f"batches of {args.batch}, {torch.get_num_threads()} threads\n"
    )
    print("| engine | sentences/s | identical to ours |")
    print("| --- | ---: | --- |")
    print(f"| translator (PyTorch) | {n / my_seconds:.1f} | |")
    print(f"| transformers generate | {n / their_seconds:.1f} | {same:,} of {n:,} |")
    print(f"\nours ÷ transformers: {their_seconds / my_seconds:.2f}×")
    for a, b, s in zip(mine, their, sentences, strict=True):
        if a != b:
            print(f"differs: {s!r}: ours {a!r}, transformers {b!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
