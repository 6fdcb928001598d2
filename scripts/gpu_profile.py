"""Where a training step goes on a GPU, and what each lever buys: several measurements in
one command, a short table last.

    python scripts/gpu_profile.py -c configs/tatoeba-gpu.toml -c configs/base.toml --out DIR

For each config (its data prepared first if missing), on fresh Trainers with the same seed:

1. the levers side by side (--variants; the catalogue is VARIANTS): the config as it is,
   static shapes (`train.pad_to_multiple` 8), `model.attention_dropout` 0, the token
   budget ×4, `train.cuda_graphs` (alone, over static shapes, with ×4 tokens),
   `train.compile` with dynamic shapes and over static shapes, and the levers together
   (CUDA graphs, static shapes, attention dropout 0), and Transformer-big's width (d_model
   1024, 16 heads, ff 4096) with the levers: target tokens/s over --steps updates
   after one update of each batch shape (three with CUDA graphs: two eager, one recording)
   and --warmup more (that warm-up, building the Trainer, compiling and recording included,
   is its own column), MFU against the measured bf16 8192³ matmul
   peak, and the mean loss over the timed updates (variants that keep the batches train on
   the same ones from the same seed). A variant that fails prints its error and the rest go on;
2. a torch.profiler window of --profile-steps updates of the config as it is and of the
   fastest variant: GPU kernel time against wall time (the rest is launch gaps and host
   waits), host syncs per update (aten::_local_scalar_dense is .item()/.tolist();
   cudaStreamSynchronize), kernel and graph launches per update, and the GPU time in
   matmuls, attention, the loss over the vocabulary (softmax + nll kernels), the
   optimiser, copies, and everything else; the host time spent fetching batches;
3. bf16 autocast against fp32: the loss of the same --compare-steps updates both ways.

Tables of the profiler's top kernels (GPU time) and host operators (CPU time) go to
DIR/profile-<config>-<variant>.txt; the fastest variant's overrides to DIR/best-<config>.txt
(one `--set` value a line, for `translator train`).
"""

from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from common import load_config
from step_measures import (
    Steps,
    bf16_measured,
    bf16_vs_fp32,
    flops_per_token,
    matmul_peak,
    prime_shapes,
)
from torch.profiler import ProfilerActivity, profile

from translator.corpus.preparer import prepare
from translator.data.layout import tokenizer_file
from translator.model.flops import count_parameters
from translator.training.trainer import Trainer

GPU_GROUPS = {  # kernel name fragments, first match wins
    "attention": ("flash", "fmha", "attention", "efficient"),  # before matmul: fmha_cutlass…
    "matmul": ("gemm", "xmma", "cutlass", "nvjet", "cublas", "sm90_"),
    "loss (softmax+nll)": ("softmax", "nll", "cross_entropy"),
    "optimiser": ("adam", "multi_tensor"),
    "copies": ("memcpy", "memset"),
}
LAUNCHES = ("cudalaunchkernel", "culaunchkernel", "cudalaunchkernelexc", "culaunchkernelex")
GRAPH_LAUNCHES = ("cudagraphlaunch",)

STATIC = {"train.pad_to_multiple": 8}
COMPILED = {"train.compile": True}
GRAPHS = {"train.cuda_graphs": True}
NO_ATTENTION_DROPOUT = {"model.attention_dropout": 0.0}
LEVERS = {**GRAPHS, **STATIC, **NO_ATTENTION_DROPOUT}
BIG = {"model.d_model": 1024, "model.heads": 16, "model.ff_dim": 4096}  # Transformer-big's width
VARIANTS: dict[str, dict[str, Any]] = {  # label: overrides ("x2", "x4": train.max_tokens × it)
    "as configured": {},
    "static shapes": STATIC,
    "attention dropout 0": NO_ATTENTION_DROPOUT,
    "max_tokens x4": {"x4": True},
    "cuda graphs": GRAPHS,
    "cuda graphs, static shapes": {**GRAPHS, **STATIC},
    "cuda graphs, max_tokens x4": {**GRAPHS, "x4": True},
    "compile": COMPILED,
    "compile, static shapes": {**COMPILED, **STATIC},
    "levers": LEVERS,
    "levers, max_tokens x4": {**LEVERS, "x4": True},
    "levers, max_tokens x2": {**LEVERS, "x2": True},
    "big (d_model 1024, 16 heads, ff 4096), levers": {**BIG, **LEVERS},
    "big, levers, max_tokens x2": {**BIG, **LEVERS, "x2": True},
}


def overrides(label: str, max_tokens: int) -> dict[str, Any]:
    values = dict(VARIANTS[label])
    for times in (2, 4):
        if values.pop(f"x{times}", False):
            values["train.max_tokens"] = times * max_tokens
    return values


def load(path: str, args, **values: Any):
    """The config on --device with its stem's --input corpora, --set values and `values`."""
    stem = Path(path).stem
    sets = [f"data.inputs={args.inputs[stem]!r}"] if stem in args.inputs else []
    sets += args.sets.get(stem, [])
    return load_config(path, sets, {"train.device": args.device, **values})


def measure(config, args, peak: float) -> dict:
    """A fresh Trainer's tokens/s after its warm-up (one update of each batch shape, then
    --warmup updates), and the seconds from building the Trainer to the end of warm-up."""
    began = time.perf_counter()
    trainer = Trainer(config, progress=False)
    prime_shapes(trainer, seconds=args.seconds)
    steps = Steps(trainer)
    steps.run(args.warmup, args.seconds)
    warm = time.perf_counter() - began
    fpt = flops_per_token(trainer, sample=300)
    tokens, wall, _, losses = steps.run(args.steps, args.seconds)
    rate = tokens / wall
    return {
        "tok/s": rate,
        "mfu": rate * fpt / peak,
        "loss": float(losses.mean()),
        "warm": warm,
        "shapes": trainer.data.train.distinct_shapes(),
        "t": trainer,
    }


def profile_window(trainer: Trainer, n: int, out: Path, seconds: float) -> dict:
    steps = Steps(trainer)
    steps.run(5, seconds)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        _, wall, fetch, _ = steps.run(n, seconds)
    averages = prof.key_averages()
    out.write_text(
        averages.table(sort_by="self_device_time_total", row_limit=40)
        + "\n\nhost operators by self CPU time\n"
        + averages.table(sort_by="self_cpu_time_total", row_limit=40)
    )
    gpu = dict.fromkeys([*GPU_GROUPS, "other"], 0.0)
    counts = {"syncs": 0, "items": 0, "launches": 0, "graphs": 0}
    optimiser_host = 0.0
    for e in averages:
        name = e.key.lower()
        if e.device_type == torch.autograd.DeviceType.CUDA:
            group = next(
                (g for g, keys in GPU_GROUPS.items() if any(k in name for k in keys)), "other"
            )
            gpu[group] += e.self_device_time_total / 1e6
        elif "synchronize" in name:
            counts["syncs"] += e.count
        elif e.key == "aten::_local_scalar_dense":
            counts["items"] += e.count
        elif name in LAUNCHES:
            counts["launches"] += e.count
        elif name in GRAPH_LAUNCHES:
            counts["graphs"] += e.count
        elif e.key.startswith("Optimizer.step"):
            optimiser_host += e.cpu_time_total / 1e6
    busy = sum(gpu.values())
    return {
        "wall": wall,
        "busy": busy,
        "gpu": gpu,
        "per_update": {k: v / n for k, v in counts.items()},
        "fetch": fetch,
        "optimiser_host": optimiser_host,
    }


def profile_lines(label: str, trainer: Trainer, args, out: Path) -> list[str]:
    p = profile_window(trainer, args.profile_steps, out, args.seconds)
    per = p["per_update"]
    return [
        f"profile of {label}, {args.profile_steps} updates: wall {p['wall']:.3f} s, GPU busy "
        f"{p['busy']:.3f} s ({100 * p['busy'] / p['wall']:.0f} %); batch fetch on the host "
        f"{p['fetch']:.3f} s; optimiser.step on the host {p['optimiser_host']:.3f} s",
        f"per update: {per['launches']:.0f} kernel launches, {per['graphs']:.1f} CUDA graph "
        f"launches, {per['syncs']:.1f} stream/device syncs, {per['items']:.1f} "
        ".item()/.tolist()",
        "GPU time: "
        + ", ".join(f"{g} {100 * t / p['busy']:.0f} %" for g, t in p["gpu"].items() if t),
    ]


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def report_config(path: str, args, peak: float, out: Path) -> list[str]:
    name = Path(path).stem
    config = load(path, args)
    if not tokenizer_file(Path(config.data.dir), "zh").is_file():
        began = time.perf_counter()
        prepare(config.data)
        print(f"{name}: prepared in {time.perf_counter() - began:.1f} s", flush=True)
    lines = [f"\n## {name}"]
    labels = ["as configured", *(v for v in args.variants if v != "as configured")]
    rows, default, best = [], None, None
    for label in labels:
        values = overrides(label, config.train.max_tokens)
        try:
            result = measure(load(path, args, **values), args, peak)
        except Exception as error:  # noqa: BLE001 - one lever failing must not end the call
            traceback.print_exc()
            rows.append(f"| {label} | failed: {first_line(error)} | | | | | |")
            print(rows[-1], flush=True)
            torch._dynamo.reset()
            torch.cuda.empty_cache()
            continue
        if default is None:
            default = result
            lines.append(
                f"{count_parameters(result['t'].model):,} parameters; "
                f"{result['t'].data.train_pairs:,} pairs; max_tokens {config.train.max_tokens}"
            )
        rows.append(
            f"| {label} | {result['tok/s']:,.0f} | {result['tok/s'] / default['tok/s']:.2f} | "
            f"{100 * result['mfu']:.1f} % | {result['warm']:.0f} s | {result['shapes']} | "
            f"{result['loss']:.4f} |"
        )
        print(rows[-1], flush=True)
        if label != "as configured" and (best is None or result["tok/s"] > best[1]["tok/s"]):
            if best is not None:
                del best[1]["t"]
            best = (label, result)
        elif result is not default:
            del result["t"]
        torch.cuda.empty_cache()
    lines += [
        "| variant | target tok/s | ratio | MFU | warm-up | shapes | mean loss |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    if default is None:
        return lines
    if best:
        values = overrides(best[0], config.train.max_tokens)
        toml = {k: str(v).lower() if isinstance(v, bool) else v for k, v in values.items()}
        (out / f"best-{name}.txt").write_text("".join(f"{k}={v}\n" for k, v in toml.items()))
    for label, result in [("as configured", default), *([best] if best else [])]:
        file = out / f"profile-{name}-{label.replace(' ', '_').replace(',', '')}.txt"
        try:
            lines += profile_lines(label, result.pop("t"), args, file)
        except Exception as error:  # noqa: BLE001
            traceback.print_exc()
            lines.append(f"profile of {label} failed: {first_line(error)}")
        torch.cuda.empty_cache()
    if args.compare_steps and (unmeasured := bf16_measured(args.device)):
        lines.append(unmeasured)
    elif args.compare_steps:
        bf16, fp32 = bf16_vs_fp32(config, args.compare_steps, args.seconds)
        last = slice(-20, None)
        lines.append(
            f"bf16 vs fp32, {args.compare_steps} updates from the same seed: loss at the end "
            f"{float(bf16[last].mean()):.4f} vs {float(fp32[last].mean()):.4f}; largest "
            f"per-update gap {float((bf16 - fp32).abs().max()):.4f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", action="append", required=True)
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="CONFIG_STEM=PATH",
        help="a corpus for one config, e.g. tatoeba-gpu=gpu/en-cmn.tsv",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="CONFIG_STEM:KEY=VALUE",
        help="a config value for one config, e.g. base:data.dir=data/prepared/base-tw",
    )
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--compare-steps", type=int, default=200, help="0: skip")
    parser.add_argument(
        "--seconds", type=float, default=120.0, help="the most each timed part runs, plus a step"
    )
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--variants",
        nargs="*",
        default=list(VARIANTS)[1:],
        choices=list(VARIANTS),
        help="besides the config as it is (a compile takes over 100 s on an H100)",
    )
    args = parser.parse_args()
    args.inputs, args.sets = {}, {}
    for item in args.input:
        stem, _, path = item.partition("=")
        args.inputs.setdefault(stem, []).append(path)
    for item in args.set:
        stem, _, assignment = item.partition(":")
        args.sets.setdefault(stem, []).append(assignment)
    args.out.mkdir(parents=True, exist_ok=True)

    peak, peak_name = matmul_peak(args.device)
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    head = [f"{device}, torch {torch.__version__}; {peak_name} peak {peak / 1e12:.1f} TFLOP/s"]
    print(head[0], flush=True)
    lines = head
    for path in args.config:
        lines += report_config(path, args, peak, args.out)
        print("\n".join(lines), flush=True)  # so far: a later config may run out of time
        (args.out / "gpu_profile.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
