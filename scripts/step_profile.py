"""One config's training step on this device, measured: what an update dispatches and where
it could go faster.

    python scripts/step_profile.py -c configs/tatoeba-cpu.toml [--device cpu]
    python scripts/step_profile.py -c configs/base.toml --pairs 200000   # a corpus made for it

For the config as it is and with static shapes (`train.pad_to_multiple`, default 8 here):
the batches, distinct (rows, source length, target length) shapes and padding of an epoch.
Then, eager, in the run's precision: the aten ops an update dispatches and its host syncs
(`.item()` and the like: `aten::_local_scalar_dense`, `equal`, `is_nonzero`, `nonzero`
and device-to-host copies, each of which stops the host until the device catches up), and
the time of those ops by kind (matmuls, casts and copies, dropout masks, the optimiser,
softmax and loss, the rest: OP_KINDS; kernel time on a CPU, launch time on a GPU).
Compiled (`train.compile`: forward and loss with `fullgraph=True`): its graph breaks (an
error under fullgraph, so 0 or the step does not compile) and how many graphs an epoch's
shapes compile to, dynamic and static, traced by TorchDynamo alone (no code generated, so
it is quick). Last, target tokens/s of the Trainer's own updates in fp32 and in bf16, with
MFU against the measured fp32 and bf16 matmul peaks, side by side in one process. On a CPU
without bf16 matrix instructions (`translator.runtime.cpu_bf16`) bf16 is not measured: the
script says so in one line and goes on. Every timed part stops at its budget (--seconds,
--peak-seconds, --prime-seconds) whatever one operation costs, plus that operation.

A config whose corpus is missing (base.toml names a 5M-pair file) is given one of
`--pairs` pairs written by scripts/make_corpus.py from the shared Tatoeba file, prepared
into a directory of its own under --work.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from common import ROOT, load_config, with_values
from step_measures import bf16_measured, flops_per_token, matmul_peak, tokens_per_s
from torch.utils._python_dispatch import TorchDispatchMode

from translator.config import Config
from translator.corpus.preparer import prepare
from translator.data.dataset import load_training_data
from translator.data.layout import tokenizer_file
from translator.runtime import keep_freed_memory
from translator.training.trainer import Trainer

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pad-to-multiple", type=int, default=8, help="the static shapes measured")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed per precision")
    parser.add_argument(
        "--warmup", type=int, default=1000, help="most shapes primed (one update each) first"
    )
    parser.add_argument("--updates", type=int, default=3, help="updates counted for ops/syncs")
    parser.add_argument("--pairs", type=int, default=200_000, help="a made corpus's size")
    parser.add_argument("--work", type=Path, default=ROOT / "data/prepared/step_profile")
    parser.add_argument(
        "--compile-shapes", type=int, default=12, help="distinct shapes traced per column"
    )
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument("--set", action="append", default=[], help="section.key=value")
    parser.add_argument("--peak-seconds", type=float, default=2.0, help="each matmul peak")
    parser.add_argument(
        "--prime-seconds", type=float, default=120.0, help="most spent priming shapes, each"
    )
    args = parser.parse_args()

    config = load_config(args.config, args.set, values={"train.device": args.device})
    config = with_corpus(config, args.pairs, args.work)
    config = with_values(config, train__run_dir=str(args.work / "run"))
    keep_freed_memory()  # as `translator train` does
    name = Path(args.config).stem
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


if __name__ == "__main__":
    main()
