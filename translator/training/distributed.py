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
random states) travels over a gloo group of its own, `Ranks.control`. DDP keeps its group
alive after `destroy_process_group()` (PyTorch holds it from C++), so that group's gloo
threads run on into the interpreter's exit; a gloo thread that then frees the last
reference to a tensor created in Python needs the interpreter's lock, is killed instead,
and the worker dies with "terminate called without an active exception" (SIGABRT) after
its run finished. The control group is really destroyed, its threads joined, while the
interpreter is alive, and DDP's group never holds a tensor Python made (its buffers, the
constant position tables, are not broadcast).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    active: bool = False  # in a process group (under torchrun, one process included)
    control: Any = None  # the gloo group for what the host reads (DDP's group never carries it)

    @property
    def main(self) -> bool:
        return self.rank == 0


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
    control = dist.new_group(backend="gloo")
    ranks = Ranks(dist.get_rank(), dist.get_world_size(), local_rank, True, control)
    return ranks, device


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


def sum_all(value: torch.Tensor, ranks: Ranks) -> float:
    """The sum over ranks of a one-number tensor, read on the host (a host-device sync)."""
    total = value.detach().to("cpu", copy=True)
    if ranks.active:
        dist.all_reduce(total, group=ranks.control)
    return total.item()


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
    """Leave the process group `init` joined, if it did: also after an error while the
    Trainer was being built, so that no worker exits with the group alive."""
    if launched_by_torchrun() and dist.is_initialized():
        dist.destroy_process_group()
