"""Is training and decoding on a GPU correct? Several checks in one command, a table last.

    python scripts/gpu_check.py -c configs/tatoeba-gpu.toml --out DIR [--device cuda]

1. bf16 autocast against fp32: the loss of the same --steps updates from one seed, both
   ways: the largest gap of one update's loss and the gap of the last 20 updates' mean.
2. `train.compile` against eager, the same over --compile-steps updates (bf16 both), and
   `train.cuda_graphs` against eager over --graph-steps updates (dropout on: a replay
   draws from the CUDA generator as the eager step does).
3. Resume (`train --resume`): --epochs epochs straight through, twice (two runs of the same
   seed differ by the GPU's own nondeterminism: atomics in the backward pass), and once
   stopped an epoch early then resumed. The last epoch's losses and the largest weight
   difference, resumed against straight, beside straight against straight. The runs use
   `train.ema` and `train.plateau_metric = "bleu"`, so the average and the schedule travel
   through last.pt too, and dropout draws from the restored CUDA random state.
4. Cached against uncached greedy decoding (the decoder run over the whole prefix for every
   token: scripts/reference/naive.py's, bench.py's reference) of --sentences validation
   sentences with the model from 3, in fp32: the share of sentences with the same output.

On a CPU without bf16 matrix instructions check 1 is one line saying it was not measured.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from common import ROOT, load_on
from reference import naive
from step_measures import Steps, bf16_measured, bf16_vs_fp32, prime_shapes

from translator.corpus.preparer import prepare
from translator.data.batching import pad, padding_mask
from translator.data.layout import read_split, tokenizer_file
from translator.inference.search import Greedy, beam_search
from translator.inference.text import Translator
from translator.model.rundir import RunDir
from translator.training.graphs import WARMUP
from translator.training.trainer import Trainer, train


def gaps(a: torch.Tensor, b: torch.Tensor) -> str:
    tail = (a[-20:].mean() - b[-20:].mean()).abs()
    return f"largest per-update gap {(a - b).abs().max():.4f}, last 20 updates' mean {tail:.4f}"


def on_vs_off(config, key: str, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The losses of the same `n` updates with train.`key` on and off, each Trainer primed
    alike (so a CUDA graph is recorded for every shape before the compared updates)."""
    curves = []
    for on in (True, False):
        setattr(config.train, key, on)
        trainer = Trainer(config, progress=False)
        prime_shapes(trainer, times=1 + WARMUP)  # the same updates either way
        curves.append(Steps(trainer).run(n)[3])
    setattr(config.train, key, False)
    return curves[0], curves[1]


def resume_runs(path: str, device: str, inputs, epochs: int, out: Path) -> dict[str, Path]:
    """Run directories: straight (twice) and resumed, `epochs` epochs each."""
    values = {"train.ema": 0.999, "train.plateau_metric": "bleu", "train.max_minutes": 0}
    runs = {}
    for name in ("straight", "again", "resumed"):
        run_dir = out / f"resume-{name}"
        first = epochs - 1 if name == "resumed" else epochs
        config = load_on(path, device, inputs, **values, **{"train.run_dir": str(run_dir)})
        config.train.max_epochs, config.train.patience = first, epochs + 1
        train(config, overwrite=True, progress=False)
        if name == "resumed":
            config.train.max_epochs = epochs
            train(config, resume=True, progress=False)
        runs[name] = run_dir
    return runs


def compare_runs(a: Path, b: Path) -> str:
    last = [RunDir(d).metric_rows()[-1] for d in (a, b)]
    weights = [torch.load(RunDir(d).last, map_location="cpu")["model"] for d in (a, b)]
    largest = max((weights[0][k].float() - weights[1][k].float()).abs().max() for k in weights[0])
    train_gap = abs(float(last[0]["train_loss"]) - float(last[1]["train_loss"]))
    valid_gap = abs(float(last[0]["valid_loss"]) - float(last[1]["valid_loss"]))
    return f"train loss gap {train_gap:.5f}, valid loss gap {valid_gap:.5f}, weights {largest:.2e}"


def cached_vs_uncached(checkpoint: Path, data_dir: str, device: str, n: int) -> str:
    """Greedy search with the key/value cache against the naive re-decode of the whole
    prefix for every token (the speed benchmark's reference), in fp32, 40 tokens each."""
    translator = Translator.from_checkpoint(checkpoint, device, precision="fp32", engine="torch")
    model = translator.engine.model.float().eval()
    sources = translator.encode(read_split(data_dir, "valid")[0][:n])
    limits = [40] * len(sources)
    expected = naive.greedy_redecode(model, sources, limits, batch_size=64)
    got = []
    for start in range(0, len(sources), 64):
        src = pad(sources[start : start + 64]).to(model.project.weight.device)
        max_lens = torch.full((src.size(0),), 40)
        got += [h[0][0] for h in beam_search(model, src, padding_mask(src), max_lens, Greedy())]
    same = sum(g == e for g, e in zip(got, expected, strict=True))
    return f"{same} of {len(expected)} sentences identical ({same / len(expected):.1%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", default=str(ROOT / "configs/tatoeba-gpu.toml"))
    parser.add_argument("--input", action="append", help="the corpus, instead of the config's")
    parser.add_argument("--steps", type=int, default=200, help="0: no bf16 check")
    parser.add_argument("--compile-steps", type=int, default=50, help="0: no compile check")
    parser.add_argument("--graph-steps", type=int, default=50, help="0: no CUDA graph check")
    parser.add_argument("--epochs", type=int, default=3, help="0: no resume or decoding check")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--out", type=Path, default=Path("runs/gpu-check"))
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    config = load_on(args.config, args.device, args.input)
    if not tokenizer_file(config.data.dir, "zh").is_file():
        prepare(config.data)
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    lines = [f"{device}, torch {torch.__version__}, {args.config}"]

    def report(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    if args.graph_steps:
        curves = on_vs_off(config, "cuda_graphs", args.graph_steps)
        report(f"CUDA graphs vs eager, {args.graph_steps} updates: {gaps(*curves)}")
    if args.steps and (unmeasured := bf16_measured(args.device)):
        report(unmeasured)
    elif args.steps:
        report(f"bf16 vs fp32, {args.steps} updates: {gaps(*bf16_vs_fp32(config, args.steps))}")
    if args.epochs:
        runs = resume_runs(args.config, args.device, args.input, args.epochs, args.out)
        floor = compare_runs(runs["straight"], runs["again"])
        report(f"resume, {args.epochs} epochs, straight vs straight: {floor}")
        report(f"resume, resumed vs straight: {compare_runs(runs['resumed'], runs['straight'])}")
        checkpoint = RunDir(runs["straight"]).last
        cached = cached_vs_uncached(checkpoint, config.data.dir, args.device, args.sentences)
        report(f"cached vs uncached greedy, fp32: {cached}")
    if args.compile_steps:
        curves = on_vs_off(config, "compile", args.compile_steps)
        report(f"compiled vs eager, {args.compile_steps} updates: {gaps(*curves)}")
    (args.out / "gpu_check.md").write_text("\n".join(f"- {line}" for line in lines) + "\n")


if __name__ == "__main__":
    main()
