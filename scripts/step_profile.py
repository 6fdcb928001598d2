"""One config's training step on this device: what an update dispatches, where its time
goes, and what each speed or quality lever costs or buys; one of three ways a call.

    python scripts/step_profile.py -c configs/tatoeba-cpu.toml            # the step
    python scripts/step_profile.py -c configs/base.toml --pairs 200000    # a corpus made for it
    python scripts/step_profile.py -c configs/tatoeba-gpu.toml -c configs/base.toml \
        --variants --out DIR                                            # the levers (a GPU's)
    python scripts/step_profile.py -c configs/tatoeba-cpu-60.toml --lever-cost --updates 150

**The step** (the default). For the config as it is and with static shapes
(`train.pad_to_multiple`, default 8 here): the batches, distinct (rows, source length,
target length) shapes and padding of an epoch. Then, eager, in the run's precision: the
aten ops an update dispatches and its host syncs (`.item()` and the like:
`aten::_local_scalar_dense`, `equal`, `is_nonzero`, `nonzero` and device-to-host copies,
each of which stops the host until the device catches up), and the time of those ops by
kind (matmuls, casts and copies, dropout masks, the optimiser, softmax and loss, the rest:
OP_KINDS; kernel time on a CPU, launch time on a GPU). Compiled (`train.compile`: forward
and loss with `fullgraph=True`): its graph breaks (an error under fullgraph, so 0 or the
step does not compile) and how many graphs an epoch's shapes compile to, dynamic and
static, traced by TorchDynamo alone (no code generated, so it is quick). Last, target
tokens/s of the Trainer's own updates in fp32 and in bf16, with MFU against the measured
fp32 and bf16 matmul peaks, side by side in one process. On a CPU without bf16 matrix
instructions (`translator.runtime.cpu_bf16`) bf16 is not measured: the script says so in
one line and goes on. Every timed part stops at its budget (--seconds, --peak-seconds,
--prime-seconds) whatever one operation costs, plus that operation. A config whose corpus
is missing (base.toml names a 5M-pair file) is given one of `--pairs` pairs written by
scripts/make_corpus.py from the shared Tatoeba file, prepared into a directory of its own
under --work.

**--variants [NAME …]**: where a step goes on a GPU, and what each speed lever buys. For
each config (its data prepared first if missing), on fresh Trainers with the same seed:

1. the levers side by side (the names given, else the whole catalogue, VARIANTS): the
   config as it is, static shapes (`train.pad_to_multiple` 8), `model.attention_dropout`
   0, the token budget ×4, `train.cuda_graphs` (alone, over static shapes, with ×4
   tokens), `train.compile` with dynamic shapes and over static shapes, and the levers
   together (CUDA graphs, static shapes, attention dropout 0), and Transformer-big's width
   (d_model 1024, 16 heads, ff 4096) with the levers: target tokens/s over --steps updates
   after one update of each batch shape (three with CUDA graphs: two eager, one
   recording) and --warmup-steps more (that warm-up, building the Trainer, compiling and
   recording included, is its own column), MFU against the measured bf16 8192³ matmul
   peak (fp32 2048³ on a CPU), and the mean loss over the timed updates (variants that
   keep the batches train on the same ones from the same seed). A variant that fails
   prints its error and the rest go on;
2. a torch.profiler window of --profile-steps updates of the config as it is and of the
   fastest variant: GPU kernel time against wall time (the rest is launch gaps and host
   waits), host syncs per update (aten::_local_scalar_dense is .item()/.tolist();
   cudaStreamSynchronize), kernel and graph launches per update, and the GPU time in
   matmuls, attention, the loss over the vocabulary (softmax + nll kernels), the
   optimiser, copies, and everything else; the host time spent fetching batches;
3. bf16 autocast against fp32: the loss of the same --compare-steps updates both ways.

In the folder --out names: the table, as step_profile.md (written again after each
config); tables of the profiler's top kernels (GPU time) and host operators (CPU time), as
profile-<config>-<variant>.txt; the fastest variant's overrides, as best-<config>.txt (one
`--set` value a line, for `translator train`).

**--lever-cost**: what each quality lever costs in time and memory: short training runs
of one config side by side, each lever alone added to the config with every lever off; a
table of training tokens/s and peak resident memory, each as a ratio to that plain run,
last. Each run is its own `translator train --max-updates N` process (--updates; so its
peak memory is its own: the `wait4` rusage of that child), one after another; tokens/s is
the run's `train_tokens_per_s` in metrics.tsv (training only, not the validation at the
cut). The plain run has `train.ema=0` and `data.subword_sampling=0`;
where the config samples, the plain run reads a prepared directory of its own
(`<data.dir>-plain`), and sampling K where the config does not reads `<data.dir>-sw<K>`,
so the config's own prepared data are never re-encoded. `train.plateau_metric` costs
nothing an update (BLEU is computed each epoch anyway) and is not run. Data are prepared
before any timing. Each run's tokens/s includes its first updates (graph warm-up, page
cache), so give it a hundred updates or more. Quote the ratios, not the absolute figures,
and keep the machine otherwise idle.

`--set [CONFIG_STEM:]KEY=VALUE` changes every config, or the one named
(`base:data.dir=data/prepared/base-tw`); `--input CONFIG_STEM=PATH` gives one config its
corpus (a GPU machine keeps the data elsewhere).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from common import (
    ROOT,
    config_home,
    end_on_sigterm,
    load_config,
    session,
    translator_command,
    with_values,
)
from step_measures import (
    Steps,
    bf16_measured,
    bf16_vs_fp32,
    flops_per_token,
    matmul_peak,
    prime_shapes,
    tokens_per_s,
)
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from translator.config import Config
from translator.corpus.preparer import prepare
from translator.data.dataset import load_training_data
from translator.data.layout import tokenizer_file
from translator.model.flops import count_parameters
from translator.runtime import keep_freed_memory, pick_device
from translator.training.trainer import Trainer


def load(path: str, args, **values: Any) -> Config:
    """The config on --device with its stem's --input corpora, the --set values for every
    config and for its stem, and `values`."""
    stem = Path(path).stem
    sets = [f"data.inputs={args.inputs[stem]!r}"] if stem in args.inputs else []
    sets += args.sets.get("", []) + args.sets.get(stem, [])
    return load_config(path, sets, {"train.device": args.device, **values})


# ---- the step ---------------------------------------------------------------------------
aten = torch.ops.aten
SYNCS = {
    aten._local_scalar_dense.default,  # .item(), int(t), float(t), bool(t)
    aten.equal.default,
    aten.is_nonzero.default,
    aten.nonzero.default,  # its output's size is read back
}


OP_KINDS = {  # aten op names (as dispatched, below autograd): where an update's time goes
    "matmuls": {"mm", "addmm", "bmm", "baddbmm"},
    "casts and copies": {"_to_copy", "copy_", "clone"},
    "dropout masks": {"random_", "randint", "bernoulli", "bernoulli_", "ge"},
    "optimiser and clipping": {"_fused_adamw_", "_fused_adam_", "linalg_vector_norm"},
    "softmax and loss": {
        "_softmax",
        "_log_softmax",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
        "nll_loss_forward",
        "nll_loss_backward",
    },
}


def op_kind(func) -> str:
    name = func.overloadpacket.__name__
    if name.startswith("_foreach_"):  # clipping's norms, a foreach optimiser
        return "optimiser and clipping"
    return next((kind for kind, names in OP_KINDS.items() if name in names), "everything else")


class DispatchCounter(TorchDispatchMode):
    """Counts the aten ops dispatched inside it, and among them the host syncs; times each
    (on a CPU an op's time is its kernel's; on a GPU only its launch)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter = Counter()
        self.syncs: Counter = Counter()
        self.seconds: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops[func] += 1
        if func in SYNCS or _to_host(func, args, kwargs):
            self.syncs[func] += 1
        began = time.perf_counter()
        out = func(*args, **kwargs)
        self.seconds[func] += time.perf_counter() - began
        return out

    def by_kind(self) -> dict[str, float]:
        """Seconds in each OP_KINDS kind (and the rest), largest first."""
        kinds: Counter = Counter()
        for func, seconds in self.seconds.items():
            kinds[op_kind(func)] += seconds
        return dict(kinds.most_common())


def _to_host(func, args, kwargs) -> bool:
    """A copy from an accelerator's memory to the host's."""
    if func not in (aten._to_copy.default, aten.copy_.default):
        return False
    if func is aten.copy_.default:
        return args[0].device.type == "cpu" and args[1].device.type != "cpu"
    target = kwargs.get("device")
    return (
        target is not None and torch.device(target).type == "cpu" and args[0].device.type != "cpu"
    )


def count_dispatch(trainer: Trainer, updates: int) -> tuple[float, float, DispatchCounter]:
    """aten ops and host syncs per update, over `updates` of the Trainer's own updates
    (Trainer.update: batch to device, forward, loss, backward, clipping, AdamW) run once
    before, and the counter (its syncs and seconds)."""
    plan, groups = trainer.start_epoch()
    trainer.update(plan, groups[0])  # the first update makes the optimiser's state
    counted = groups[1 : updates + 1]
    for group in counted:  # once before counting: kernels built per shape are built
        trainer.update(plan, group)
    with DispatchCounter() as counter:
        for group in counted:
            trainer.update(plan, group)
    n = min(updates, len(groups) - 1)
    return sum(counter.ops.values()) / n, sum(counter.syncs.values()) / n, counter


def shape_rows(config: Config, multiple: int) -> dict:
    """Batches, distinct shapes and padding of epoch 0 with `multiple` (1: as planned today)."""
    data = load_training_data(with_values(config, train__pad_to_multiple=multiple))
    plan = data.train.epoch(0)
    return {
        "batches": len(plan),
        "shapes": plan.distinct_shapes(),
        "padding": plan.padding(),
    }


class GraphCounter:
    """A TorchDynamo backend that counts the graphs it is given and runs them as traced."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs) -> object:
        self.graphs += 1
        return gm.forward


def compiled_counts(trainer: Trainer, static: bool, most: int) -> tuple[int, int, int]:
    """(graph breaks, graphs compiled, batches run) for forward + loss traced with
    fullgraph over one batch of each of the first `most` distinct shapes of epoch 0 (and a
    second batch of the first shape, which must reuse its graph)."""
    import torch._dynamo  # here: it takes seconds to import, and only this part needs it

    plan = trainer.data.train.epoch(0)
    picked = plan.first_of_each_shape()[:most]
    again = [i for i in range(len(plan)) if tuple(plan.shapes[i]) == tuple(plan.shapes[picked[0]])]
    picked += again[1:2]
    batch = plan[picked[0]].to(trainer.device)
    inputs = (batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out)
    breaks = torch._dynamo.explain(trainer.loss)(*inputs).graph_break_count
    torch._dynamo.reset()
    counter = GraphCounter()
    saved = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(saved, len(picked) + 1)
    step = torch.compile(trainer.loss, backend=counter, fullgraph=True, dynamic=not static)
    for i in picked:
        batch = plan[i].to(trainer.device)
        step(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_out)
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = saved
    return breaks, counter.graphs, len(picked)


def with_corpus(config: Config, pairs: int, work: Path) -> Config:
    """`config`, given a made corpus of `pairs` pairs (prepared under `work`) if one of its
    inputs is missing; prepared first if it is not."""
    if not all(Path(p).is_file() for c in config.data.inputs for p in c.paths):
        corpus = work / f"corpus-{pairs}.tsv"
        if not corpus.is_file():
            work.mkdir(parents=True, exist_ok=True)
            make = [sys.executable, str(ROOT / "scripts/make_corpus.py"), str(pairs), str(corpus)]
            subprocess.run(make, check=True, stdout=subprocess.DEVNULL)
        config = with_values(
            config, data__inputs=[str(corpus)], data__dir=str(work / f"prepared-{pairs}")
        )
    if not tokenizer_file(Path(config.data.dir), "zh").is_file():
        names = ", ".join(c.name for c in config.data.inputs)
        print(f"preparing {names} into {config.data.dir} ...", flush=True)
        prepare(config.data)
    return config


def report_step(path: str, args) -> None:
    """The step of one config, printed (the default)."""
    config = load(path, args)
    config = with_corpus(config, args.pairs, args.work)
    config = with_values(config, train__run_dir=str(args.work / "run"))
    keep_freed_memory()  # as `translator train` does
    name = Path(path).stem
    device = torch.device(args.device)
    unmeasured = bf16_measured(device)  # None, or the line that says why bf16 is not measured
    precisions = ("fp32",) if unmeasured else ("fp32", "bf16")
    peaks = {p: matmul_peak(device, PEAK_DTYPES[p], args.peak_seconds)[0] for p in precisions}
    print(
        f"{name} on {device} ({torch.get_num_threads()} threads), torch {torch.__version__}; "
        "matmul peaks "
        + ", ".join(f"{p} {peak / 1e9:,.0f}" for p, peak in peaks.items())
        + " GFLOP/s"
    )
    if unmeasured:
        print(unmeasured)

    trainer = Trainer(config, progress=False)  # train.pad_to_multiple as it resolves here
    multiples = sorted({1, trainer.config.train.pad_to_multiple, args.pad_to_multiple})
    shapes = {m: shape_rows(config, m) for m in multiples}
    ops, syncs, counter = count_dispatch(trainer, args.updates)
    counted_in, counted_multiple = trainer.precision, trainer.config.train.pad_to_multiple
    compiled = {}
    if not args.skip_compile:
        for m in multiples:
            static_trainer = Trainer(with_values(config, train__pad_to_multiple=m), progress=False)
            compiled[m] = compiled_counts(static_trainer, m > 1, args.compile_shapes)
            del static_trainer
    per_token = flops_per_token(trainer, sample=50)
    del trainer

    multiple: dict[str, int] = {}
    speed = {}  # each precision with the static shapes it resolves to (train.pad_to_multiple)
    for precision in precisions:
        trainer = Trainer(with_values(config, train__precision=precision), progress=False)
        multiple[precision] = trainer.config.train.pad_to_multiple
        speed[precision] = tokens_per_s(
            trainer, args.seconds, shapes=args.warmup, prime_seconds=args.prime_seconds
        )
        del trainer

    print(f"\n{'':40s}" + "".join(f"{label(m):>22s}" for m in multiples))
    for key, fmt in (("batches", "{:,}"), ("shapes", "{:,}"), ("padding", "{:.1%}")):
        title = {"batches": "batches an epoch", "shapes": "distinct shapes an epoch"}.get(
            key, "padding (share of token positions)"
        )
        print(f"{title:40s}" + "".join(f"{fmt.format(shapes[m][key]):>22s}" for m in multiples))
    if compiled:
        print(
            f"{'compiled: graph breaks':40s}" + "".join(f"{compiled[m][0]:>22d}" for m in multiples)
        )
        print(
            f"{'compiled: graphs for the shapes run':40s}"
            + "".join(f"{f'{compiled[m][1]} for {compiled[m][2]} batches':>22s}" for m in multiples)
        )
    print(
        f"\neager update in {counted_in} (train.precision {config.train.precision}), "
        f"pad_to_multiple {counted_multiple}:"
    )
    print(f"  aten ops an update {ops:,.0f}; host syncs an update {syncs:g}")
    for func, count in counter.syncs.items():
        print(f"    {func}: {count}")
    kinds = counter.by_kind()
    total = sum(kinds.values())
    where = "kernel" if torch.device(args.device).type == "cpu" else "launch (host)"
    print(
        f"  {where} time of the ops, by kind: "
        + ", ".join(f"{kind} {share / total:.0%}" for kind, share in kinds.items())
    )
    print("\ntraining, target tokens/s (eager; pad_to_multiple as each precision resolves it)")
    for precision, rate in speed.items():
        flops = rate * per_token
        print(
            f"  {precision:5s} pad {multiple[precision]}  {rate:9,.0f} tok/s  "
            f"{flops / 1e9:8.1f} GFLOP/s  MFU "
            f"{flops / peaks[precision]:5.1%} of the {precision} peak, "
            f"{flops / peaks['fp32']:5.1%} of fp32's"
        )
    if unmeasured:
        print(f"  {unmeasured}")
    ratio = f"{speed['bf16'] / speed['fp32']:.2f}" if "bf16" in speed else "not measured"
    print(f"\nratios: bf16/fp32={ratio}")


PEAK_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def label(multiple: int) -> str:
    return "as planned" if multiple == 1 else f"pad_to_multiple {multiple}"


# ---- --variants: the levers side by side --------------------------------------------------
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


def measure(config, args, peak: float) -> dict:
    """A fresh Trainer's tokens/s after its warm-up (one update of each batch shape, then
    --warmup updates), and the seconds from building the Trainer to the end of warm-up."""
    began = time.perf_counter()
    trainer = Trainer(config, progress=False)
    prime_shapes(trainer, seconds=args.seconds)
    steps = Steps(trainer)
    steps.run(args.warmup_steps, args.seconds)
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


def report_variants(path: str, args, peak: float, out: Path) -> list[str]:
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


# ---- --lever-cost: the quality levers' cost --------------------------------------------------
OFF = ["train.ema=0", "train.final='best'", "data.subword_sampling=0"]

MAX_MINUTES = 15.0  # each variant's training stops here if its updates take longer


def lever_variants(data, sampling: int, ema: float) -> dict[str, list[str]]:
    """The plain run and each lever alone, as --set overrides (`data`: the config's [data])."""
    plain_dir = data.dir if data.subword_sampling == 0 else f"{data.dir}-plain"
    sampled_dir = data.dir if data.subword_sampling == sampling else f"{data.dir}-sw{sampling}"
    plain = [*OFF, f"data.dir={plain_dir}"]
    sampled = [f"data.dir={sampled_dir}", f"data.subword_sampling={sampling}"]
    return {
        "plain": plain,
        f"ema {ema:g}": [*plain, f"train.ema={ema}"],
        f"subword sampling {sampling}": [*OFF, *sampled],
    }


def sets(overrides: list[str]) -> list[str]:
    return [word for value in overrides for word in ("--set", value)]


def timed_train(
    config: str, overrides: list[str], updates: int, run_dir: Path, device: str | None
) -> tuple[float, float]:
    """Train in a child process; (its training tokens/s, its peak resident memory in MiB)."""
    command = translator_command(
        "train", "-c", config, "--max-updates", str(updates), "--overwrite"
    )
    command += ["--max-minutes", str(MAX_MINUTES)]  # a slow CPU stops at the clock instead
    command += ["--device", device] if device else []
    overrides = [*overrides, f"train.run_dir={run_dir}"]
    with session(
        command + sets(overrides), stdout=subprocess.DEVNULL, cwd=config_home(config)
    ) as child:  # however this ends, nothing the training started outlives it
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"training with {' '.join(overrides)} failed ({child.returncode})")
    with open(run_dir / "metrics.tsv", newline="") as f:
        last = list(csv.DictReader(f, delimiter="\t"))[-1]
    return float(last["train_tokens_per_s"]), usage.ru_maxrss / 1024


def report_lever_cost(path: str, args) -> None:
    """Each quality lever's training tokens/s and peak memory against the plain config's,
    printed (--lever-cost)."""
    config, out = str(Path(path).resolve()), args.out.resolve()
    given = args.sets.get("", []) + args.sets.get(Path(path).stem, [])
    data = load_config(config, given).data  # its paths from the project root, as runs read them
    levers = lever_variants(data, args.subword_sampling, args.ema)
    runs = {name: [*given, *overrides] for name, overrides in levers.items()}
    for overrides in runs.values():  # untimed: tokenizers and encodings first
        prepare = translator_command("prepare", "-c", config) + sets(overrides)
        done = subprocess.run(prepare, stdout=subprocess.DEVNULL, cwd=config_home(config))
        if done.returncode != 0:
            sys.exit(f"prepare with {' '.join(overrides)} failed")
    rows = []
    for i, (name, overrides) in enumerate(runs.items()):
        run = out / f"run{i}"
        tokens_per_s, peak_mib = timed_train(config, overrides, args.updates, run, args.device)
        rows.append((name, tokens_per_s, peak_mib))
        print(f"{name}: {tokens_per_s:,.0f} tokens/s, peak {peak_mib:,.0f} MiB", flush=True)
    _, base_speed, base_memory = rows[0]
    print(f"\n{args.updates} updates of {config} each, one after another")
    print("| run | training tokens/s | × plain | peak memory (MiB) | × plain |")
    print("| --- | --- | --- | --- | --- |")
    for name, speed, memory in rows:
        print(
            f"| {name} | {speed:,.0f} | {speed / base_speed:.2f} | {memory:,.0f} "
            f"| {memory / base_memory:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", action="append", required=True)
    parser.add_argument("--device", help="default: the first config's train.device")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="[CONFIG_STEM:]KEY=VALUE",
        help="a config value, for every config or the one named (base:data.dir=…)",
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="CONFIG_STEM=PATH",
        help="a corpus for one config, e.g. tatoeba-gpu=gpu/en-cmn.tsv",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        help="the step: timed per precision (20); --variants: the most each timed part "
        "runs, plus an update (120)",
    )
    parser.add_argument(
        "--updates",
        type=int,
        help="the step: updates counted for ops and syncs (3); --lever-cost: updates each "
        "run trains (150)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="--variants: its tables (.); --lever-cost: its runs (runs/lever-cost)",
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--variants",
        nargs="*",
        choices=list(VARIANTS),
        metavar="NAME",
        help="the config and these levers side by side (none named: all of "
        + ", ".join(f"'{v}'" for v in list(VARIANTS)[1:])
        + "; a compile takes over 100 s on an H100), its profile and bf16 against fp32",
    )
    modes.add_argument(
        "--lever-cost",
        action="store_true",
        help="each quality lever's training tokens/s and peak memory against the plain config",
    )
    step = parser.add_argument_group("the step (neither --variants nor --lever-cost)")
    step.add_argument("--pad-to-multiple", type=int, default=8, help="the static shapes measured")
    step.add_argument(
        "--warmup", type=int, default=1000, help="most shapes primed (one update each) first"
    )
    step.add_argument("--pairs", type=int, default=200_000, help="a made corpus's size")
    step.add_argument("--work", type=Path, default=ROOT / "data/prepared/step_profile")
    step.add_argument(
        "--compile-shapes", type=int, default=12, help="distinct shapes traced per column"
    )
    step.add_argument("--skip-compile", action="store_true")
    step.add_argument("--peak-seconds", type=float, default=2.0, help="each matmul peak")
    step.add_argument(
        "--prime-seconds", type=float, default=120.0, help="most spent priming shapes, each"
    )
    variants = parser.add_argument_group("--variants")
    variants.add_argument("--warmup-steps", type=int, default=30)
    variants.add_argument("--steps", type=int, default=100)
    variants.add_argument("--profile-steps", type=int, default=20)
    variants.add_argument("--compare-steps", type=int, default=200, help="0: skip")
    cost = parser.add_argument_group("--lever-cost")
    cost.add_argument("--subword-sampling", type=int, default=4)
    cost.add_argument("--ema", type=float, default=0.999)
    args = parser.parse_args()
    end_on_sigterm()  # SIGTERM, as Ctrl-C, ends the processes started below
    args.inputs, args.sets = {}, {}
    for item in args.input:
        stem, _, path = item.partition("=")
        args.inputs.setdefault(stem, []).append(path)
    for item in args.set:
        key, _, value = item.partition("=")
        stem, _, key = key.rpartition(":")  # no stem: every config's
        args.sets.setdefault(stem, []).append(f"{key}={value}")

    if args.lever_cost:
        args.updates = 150 if args.updates is None else args.updates
        args.out = args.out or Path("runs/lever-cost")
        for path in args.config:
            report_lever_cost(path, args)
        return
    first = load_config(args.config[0], args.sets.get("", []))
    args.device = args.device or str(pick_device(first.train.device))
    if args.variants is None:
        args.seconds = 20.0 if args.seconds is None else args.seconds
        args.updates = 3 if args.updates is None else args.updates
        for path in args.config:
            report_step(path, args)
        return

    args.seconds = 120.0 if args.seconds is None else args.seconds
    args.variants = args.variants or list(VARIANTS)[1:]
    args.out = args.out or Path(".")
    args.out.mkdir(parents=True, exist_ok=True)
    peak, peak_name = matmul_peak(args.device)
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    head = [f"{device}, torch {torch.__version__}; {peak_name} peak {peak / 1e12:.1f} TFLOP/s"]
    print(head[0], flush=True)
    lines = head
    for path in args.config:
        lines += report_variants(path, args, peak, args.out)
        print("\n".join(lines), flush=True)  # so far: a later config may run out of time
        (args.out / "step_profile.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
