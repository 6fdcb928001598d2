"""Training on several processes with torch.distributed, launched by torchrun
(`torchrun --nproc_per_node 4 -m translator train -c configs/tatoeba-gpu.toml`).

Each update deals the next `world × update_freq` batches out by target tokens; each rank
normalises its loss by the tokens of all of them, so DDP's averaged gradients are the whole
update's. Every value the host reads travels over a gloo group of its own (the control
group), whose only reference this module holds: `finish()` drops it, joining its threads
while the interpreter lives (docs/development.md#the-distributed-teardown).
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


def replicated(
    model: torch.nn.Module, ranks: Ranks, device: torch.device, seed: int
) -> torch.nn.Module:
    """In a process group, `model` under DDP and each rank's dropout seeded apart."""
    if not ranks.active:
        return model
    ids = [device.index] if device.type == "cuda" else None
    wrapped = torch.nn.parallel.DistributedDataParallel(
        model,
        device_ids=ids,
        broadcast_buffers=False,  # buffers: constant tables
    )
    torch.manual_seed(seed + ranks.rank)
    return wrapped


def deal(group: list[int], tokens: np.ndarray, world: int) -> list[list[int]]:
    """Batches `group` (with `tokens[i]` target tokens each) dealt to `world` ranks:
    largest first, each to the rank with the fewest tokens so far (ties: lowest rank)."""
    shares: list[list[int]] = [[] for _ in range(world)]
    load = [0] * world
    for i in sorted(group, key=lambda i: (-int(tokens[i]), i)):
        rank = min(range(world), key=lambda r: (load[r], r))
        shares[rank].append(i)
        load[rank] += int(tokens[i])
    return shares


def sum_all(value: torch.Tensor, ranks: Ranks) -> Any:
    """The sum over ranks of a tensor, read on the host (one sync, whatever its size)."""
    total = value.detach().to("cpu", copy=True)
    if ranks.active:
        dist.all_reduce(total, group=ranks.control)
    return total.tolist()


def highest(value: int, ranks: Ranks) -> int:
    """The largest `value` of all ranks. Exchanged between the hosts (gloo): through nccl
    the answer would need a device sync after every update, which left the GPU idle."""
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
    """Return when every rank has got here (rank 0 has written its last files)."""
    if ranks.active:
        dist.barrier(group=ranks.control)


def finish() -> None:
    """Leave the process groups `init` joined and end the control group's threads."""
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
