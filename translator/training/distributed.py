"""Training on several processes with torch.distributed, launched by torchrun:

    torchrun --nproc_per_node 4 -m translator train -c configs/tatoeba-gpu.toml

Each update takes the next `world × update_freq` batches of the epoch's (shared, seeded)
order and deals them out so that every rank gets about the same number of target tokens;
each rank normalises its loss by the tokens of all of them, so that the gradients averaged
by DistributedDataParallel are those of the whole update. Every decision that could
differ between ranks (stop for the time budget or a signal, NaN, early stopping, the
learning rate) is made from values all ranks share: reduced or broadcast from rank 0.
Only rank 0 writes checkpoints, metrics and progress bars. Backend: nccl on CUDA, gloo on
the CPU. Without torchrun there is one process and nothing here does anything; under torchrun
with one process the same DDP path runs, with nothing to exchange.

Two process groups: the default one carries DistributedDataParallel's gradients and
nothing else; every value the host reads (losses, stop decisions, validation results,
random states) travels over a gloo group of its own, the control group.

Leaving is `finish()`, and every path out of `train()` takes it. A gloo group runs threads
of its own until the last reference to it goes (`destroy_process_group()` only makes the
world forget it). A worker that reaches the interpreter's shutdown while a gloo thread is
still letting go of a finished collective's tensors dies after its run is done: freeing a
tensor made in Python needs the interpreter's lock, the thread is killed instead, and the
process ends with "terminate called without an active exception" (SIGABRT). The control
group carries exactly such tensors (the values above), so this module holds its only
reference and `finish()` drops it, which joins its threads while the interpreter is alive.
DDP's group keeps its threads: DistributedDataParallel leaves a reference to it inside
PyTorch that no Python object owns (torch 2.13), so they idle into the shutdown; they
carry only the gradient buckets, made and freed by PyTorch without Python objects.
scripts/studies/teardown_loop.py launches two-process runs under load and counts the aborts
(docs/development.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


_groups: dict[str, Any] = {}  # "control": the gloo group for what the host reads


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    active: bool = False  # in a process group (under torchrun, one process included)

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def control(self) -> Any:
        """The gloo group for what the host reads (DDP's group never carries it)."""
        return _groups["control"]


def launched_by_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init(device: torch.device) -> tuple[Ranks, torch.device]:
    """Join the process group torchrun set up; on CUDA, each rank on its local GPU."""
    if not launched_by_torchrun():
        return Ranks(), device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    _groups["control"] = dist.new_group(backend="gloo")
    return Ranks(dist.get_rank(), dist.get_world_size(), local_rank, True), device


def deal(group: list[int], tokens: np.ndarray, world: int) -> list[list[int]]:
    """Batches `group` (with `tokens[i]` target tokens each) dealt to `world` ranks:
    largest first, each to the rank with the fewest tokens so far (ties: lowest rank).
    The same on every rank, since it depends on the plan alone."""
    shares: list[list[int]] = [[] for _ in range(world)]
    load = [0] * world
    for i in sorted(group, key=lambda i: (-int(tokens[i]), i)):
        rank = min(range(world), key=lambda r: (load[r], r))
        shares[rank].append(i)
        load[rank] += int(tokens[i])
    return shares


def sum_all(value: torch.Tensor, ranks: Ranks) -> Any:
    """The sum over ranks of a tensor, read on the host as a number or (nested) lists of
    them: one host-device sync, whatever its size."""
    total = value.detach().to("cpu", copy=True)
    if ranks.active:
        dist.all_reduce(total, group=ranks.control)
    return total.tolist()


def highest(value: int, ranks: Ranks) -> int:
    """The largest `value` of all ranks: one answer for all. Exchanged between the hosts
    (gloo), so that asking after every update does not wait for the GPU: through nccl
    the answer would need a device sync, which left the GPU idle while the host prepared
    the next update."""
    if not ranks.active:
        return value
    tensor = torch.tensor(value)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=ranks.control)
    return int(tensor.item())


def from_main(value: Any, ranks: Ranks) -> Any:
    """Rank 0's `value`, on every rank."""
    if not ranks.active:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=ranks.control)
    return box[0]


def gather(value: Any, ranks: Ranks) -> list[Any]:
    """Every rank's `value`, in rank order, on every rank."""
    if not ranks.active:
        return [value]
    values: list[Any] = [None] * ranks.world
    dist.all_gather_object(values, value, group=ranks.control)
    return values


def wait_for_all(ranks: Ranks) -> None:
    """Return when every rank has got here: at the end of a run, so that the ranks leave
    the groups together, once rank 0 has written its last files."""
    if ranks.active:
        dist.barrier(group=ranks.control)


def finish() -> None:
    """Leave the process groups `init` joined, if it did, and end the control group's
    threads: also after an error while the Trainer was being built, so that no worker
    reaches the interpreter's shutdown with them alive (DDP's group keeps its own: see
    above)."""
    if launched_by_torchrun() and dist.is_initialized():
        dist.destroy_process_group()  # every group: the world forgets them
        _groups.clear()  # the control group's last reference: its threads are joined here
        log.debug("gloo threads left: %d", gloo_threads())


def gloo_threads() -> int:
    """The threads of gloo groups this process still runs (Linux; elsewhere 0)."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return 0
    names = []
    for task in tasks.iterdir():
        with contextlib.suppress(OSError):
            names.append((task / "comm").read_text().strip())
    return sum(name.startswith(("pt_gloo", "gloo")) for name in names)
