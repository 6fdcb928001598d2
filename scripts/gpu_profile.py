"""Where a training step goes on a GPU, and what the config-level levers buy: several
measurements in one command, a short table last.

    python scripts/gpu_profile.py -c configs/tatoeba-gpu.toml -c configs/base.toml --out DIR

For each config (its data prepared first if missing), on fresh Trainers with the same seed:

1. variants side by side: the config as it is, the token budget ×4 (`train.max_tokens`),
   and `train.compile`: target tokens/s over --steps updates after --warmup updates, MFU
   against the measured bf16 8192³ matmul peak, and the mean loss over the timed updates
   (the default and compiled variants train on the same batches from the same seed);
2. a torch.profiler window of --profile-steps updates of the config as it is: GPU kernel
   time against wall time (the rest is launch gaps and host waits), host syncs per update
   (aten::_local_scalar_dense is .item()/.tolist(); cudaStreamSynchronize), kernel launches
   per update, and the GPU time in matmuls, attention, the loss over the vocabulary
   (softmax + nll kernels), the optimiser, copies, and everything else; the host time spent
   fetching batches from the memory-mapped arrays;
3. bf16 autocast against fp32: the loss of the same --compare-steps updates both ways.

Tables of the profiler's top kernels go to DIR/profile-<config>.txt.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from common import Steps, bf16_vs_fp32, flops_per_token, load_on, matmul_peak
from torch.profiler import ProfilerActivity, profile

from translator.corpus.pipeline import prepare
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


def measure(config, args, peak: float) -> dict:
    trainer = Trainer(config, progress=False)
    steps = Steps(trainer)
    fpt = flops_per_token(trainer, sample=300)
    steps.run(args.warmup)
    tokens, wall, _, losses = steps.run(args.steps)
    rate = tokens / wall
    return {"tok/s": rate, "mfu": rate * fpt / peak, "loss": float(losses.mean()), "t": trainer}


def profile_window(trainer: Trainer, n: int, out: Path) -> dict:
    steps = Steps(trainer)
    steps.run(5)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        _, wall, fetch, _ = steps.run(n)
    averages = prof.key_averages()
    out.write_text(averages.table(sort_by="self_device_time_total", row_limit=50))
    gpu = dict.fromkeys([*GPU_GROUPS, "other"], 0.0)
    counts = {"syncs": 0, "items": 0, "launches": 0}
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
        elif name in (
            "cudalaunchkernel",
            "culaunchkernel",
            "cudalaunchkernelexc",
            "culaunchkernelex",
        ):
            counts["launches"] += e.count
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


def report_config(path: str, args, peak: float, out: Path) -> list[str]:
    name = Path(path).stem
    inputs = args.inputs.get(name)
    config = load_on(path, args.device, inputs)
    if not tokenizer_file(Path(config.data.dir), "zh").is_file():
        began = time.perf_counter()
        prepare(config.data)
        print(f"{name}: prepared in {time.perf_counter() - began:.1f} s", flush=True)
    lines = [f"\n## {name}"]
    variants = {
        "as configured": {},
        "max_tokens x4": {"train.max_tokens": config.train.max_tokens * 4},
        "compile": {"train.compile": True},
    }
    variants = {k: v for k, v in variants.items() if k == "as configured" or k in args.variants}
    rows, default = [], None
    for label, values in variants.items():
        result = measure(load_on(path, args.device, inputs, **values), args, peak)
        if default is None:
            default = result
            m = result["t"].model
            lines.append(
                f"{count_parameters(m):,} parameters; {result['t'].data.train_pairs:,} pairs; "
                f"max_tokens {config.train.max_tokens}"
            )
        else:
            del result["t"]
        rows.append(
            f"| {label} | {result['tok/s']:,.0f} | {result['tok/s'] / default['tok/s']:.2f} | "
            f"{100 * result['mfu']:.1f} % | {result['loss']:.4f} |"
        )
        print(rows[-1], flush=True)
        torch.cuda.empty_cache()
    lines += [
        "| variant | target tok/s | ratio | MFU | mean loss |",
        "|---|---|---|---|---|",
        *rows,
    ]

    p = profile_window(default.pop("t"), args.profile_steps, out / f"profile-{name}.txt")
    lines.append(
        f"profile, {args.profile_steps} updates: wall {p['wall']:.3f} s, GPU busy "
        f"{p['busy']:.3f} s ({100 * p['busy'] / p['wall']:.0f} %); batch fetch on the host "
        f"{p['fetch']:.3f} s; optimiser.step on the host {p['optimiser_host']:.3f} s"
    )
    per = p["per_update"]
    lines.append(
        f"per update: {per['launches']:.0f} kernel launches, {per['syncs']:.1f} stream/device "
        f"syncs, {per['items']:.1f} .item()/.tolist()"
    )
    lines.append(
        "GPU time: "
        + ", ".join(f"{g} {100 * t / p['busy']:.0f} %" for g, t in p["gpu"].items() if t)
    )
    torch.cuda.empty_cache()
    bf16, fp32 = bf16_vs_fp32(config, args.compare_steps)
    last = slice(-20, None)
    lines.append(
        f"bf16 vs fp32, {args.compare_steps} updates from the same seed: loss at the end "
        f"{float(bf16[last].mean()):.4f} vs {float(fp32[last].mean()):.4f}; largest per-update "
        f"gap {float((bf16 - fp32).abs().max()):.4f}"
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
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--compare-steps", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--variants",
        nargs="*",
        default=["max_tokens x4", "compile"],
        help="besides the config as it is (compile takes minutes on a GPU)",
    )
    args = parser.parse_args()
    args.inputs = {}
    for item in args.input:
        stem, _, path = item.partition("=")
        args.inputs.setdefault(stem, []).append(path)
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
