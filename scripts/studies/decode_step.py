"""Our PyTorch decoder step on this CPU: where its time goes, and what a step with less
Python per token gives, side by side in one run.

    python scripts/studies/decode_step.py runs/tatoeba-cpu/checkpoints/average5.pt
    python scripts/studies/decode_step.py CKPT --sentences 500 --no-compile   # quick

First, one greedy pass over the sentences under PyTorch's profiler: the self time of its
ops by kind (STEP_KINDS: the matrix products, attention, the KV cache's copies, the rest).
Only the rest is what fewer dispatches could remove. Then the test split's first
--sentences sentences (the checkpoint's prepared data, or --data) decoded greedy and with
beam 5, fp32, by our `Translator`, each variant in a fresh process (common.alone) once a
round, the rounds (--rounds) one after another so that a slow spell of a shared machine
falls on every variant; a row's figure is its best pass over the rounds (two passes a
process, after a warm-up):

- eager: the decoder as it ships (linear layers through oneDNN, decode.onednn);
- mkl: the same with `decode.onednn = false` (PyTorch's own sgemm);
- compiled: `Transformer.decode` (one decoder step) through `torch.compile(dynamic=True)`,
  the graph Inductor generates for every batch and cache length (oneDNN's operator has no
  Inductor lowering, so its layers are plain `nn.Linear` there); its compile time is the
  warm-up's.

Each row: sentences/s, the ratio to eager and how many outputs equal eager's. Ends with one
line: ratios: mkl_greedy=… mkl_beam5=… compiled_greedy=… compiled_beam5=…
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from translator.data.layout import read_split
from translator.inference.text import Translator
from translator.inference.torch_engine import use_onednn

# scripts/common.py, the helpers every script shares, loaded by its path: Python puts the
# study's own folder first on the module path, not scripts/ (docs/architecture.md#the-scripts)
_spec = importlib.util.spec_from_file_location("common", Path(__file__).parents[1] / "common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

STEP_KINDS = {  # profiler op names → where a decoder step's time goes
    "matrix products": {"mkldnn::_linear_pointwise", "aten::addmm", "aten::mm", "aten::bmm"},
    "attention": {"aten::_scaled_dot_product_flash_attention_for_cpu"},
    "KV cache copies": {"aten::cat", "aten::index_select"},
}
VARIANTS = ("eager", "mkl", "compiled")


def sentences(checkpoint: Path, data: Path | None, count: int) -> list[str]:
    if data is None:
        opened = Translator.from_checkpoint(checkpoint, "cpu", engine="torch")
        data = Path(opened.engine.config.data.dir)
    english, _ = read_split(data, "test")
    return list(english)[:count]


def opened(checkpoint: str, variant: str, beam: int) -> Translator:
    translator = Translator.from_checkpoint(
        checkpoint, "cpu", precision="fp32", beam=beam, engine="torch"
    )
    model = translator.engine.model
    if variant != "eager":
        use_onednn(model, False)
    if variant == "compiled":
        model.decode = torch.compile(model.decode, dynamic=True)
    return translator


def measure(checkpoint: str, variant: str, beam: int, english: list[str]) -> dict:
    """One variant, one search, in this process: its warm-up's seconds, its best
    sentences/s of two passes and its outputs."""
    translator = opened(checkpoint, variant, beam)
    began = time.perf_counter()
    translator.translate(english[:200])
    warm = time.perf_counter() - began
    rates, outputs = [], []
    for _ in range(2):
        began = time.perf_counter()
        outputs = translator.translate(english)
        rates.append(len(english) / (time.perf_counter() - began))
    return {"warm": warm, "rate": max(rates), "outputs": outputs}


def profile_kinds(checkpoint: str, english: list[str]) -> dict[str, float]:
    """The share of a greedy pass's op self time by STEP_KINDS kind (the rest: 'the rest')."""
    from torch.profiler import ProfilerActivity, profile

    translator = opened(checkpoint, "eager", 1)
    translator.translate(english[:200])
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        translator.translate(english)
    seconds: Counter = Counter()
    for event in profiler.key_averages():
        kind = next((k for k, names in STEP_KINDS.items() if event.key in names), "the rest")
        seconds[kind] += event.self_cpu_time_total
    total = sum(seconds.values())
    return {kind: seconds[kind] / total for kind in [*STEP_KINDS, "the rest"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument(
        "--data", type=Path, help="a prepared directory (default: the checkpoint's)"
    )
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes a variant")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled rows")
    args = parser.parse_args()
    if not args.checkpoint.is_file():
        sys.exit(f"error: no checkpoint at {args.checkpoint}")
    english = sentences(args.checkpoint, args.data, args.sentences)
    checkpoint = str(args.checkpoint)
    threads = torch.get_num_threads()
    print(f"{len(english)} test sentences, fp32, {threads} threads, torch {torch.__version__}")

    shares = common.alone(profile_kinds, checkpoint, english)
    print("eager greedy, op self time: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))

    variants = [v for v in VARIANTS if not (args.no_compile and v == "compiled")]
    rows: dict[tuple[str, int], dict] = {}
    for _ in range(max(args.rounds, 1)):
        for key in [(v, beam) for v in variants for beam in (1, 5)]:
            row = common.alone(measure, checkpoint, *key, english)
            if key in rows:  # the first round's warm-up (the compile) stands
                row["warm"], row["rate"] = rows[key]["warm"], max(rows[key]["rate"], row["rate"])
            rows[key] = row
    print("\n| variant | search | warm-up s | sentences/s | ÷ eager | outputs = eager |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    ratios = {}
    for (variant, beam), row in rows.items():
        base = rows["eager", beam]
        ratio = row["rate"] / base["rate"]
        same = sum(a == b for a, b in zip(row["outputs"], base["outputs"], strict=True))
        search = "greedy" if beam == 1 else f"beam {beam}"
        cells = [variant, search, f"{row['warm']:.1f}", f"{row['rate']:.1f}", f"{ratio:.2f}"]
        print("| " + " | ".join([*cells, f"{same}/{len(english)}"]) + " |")
        if variant != "eager":
            ratios[f"{variant}_{'greedy' if beam == 1 else 'beam5'}"] = ratio
    print("\nratios: " + " ".join(f"{k}={v:.2f}" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
