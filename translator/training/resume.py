"""The checkpoint side of training: what last.pt holds, and checking and loading it back
(`--resume`); and the weights of another model that a new run starts from (`init_from`).

`train.init_from` is fine-tuning: only the weights are taken; the optimiser, schedule,
counters, early stopping and the time budget start fresh (docs/training.md#fine-tuning).
The architecture in [model] and the prepared data's tokenizers must be the checkpoint's.
Explicit inputs only: this module knows nothing of the Trainer.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from translator.config import Config, from_dict
from translator.data.dataset import TrainData
from translator.data.ids import meta_file
from translator.data.layout import SIDES
from translator.errors import UserError
from translator.model import checkpoint
from translator.model.ema import WeightEMA
from translator.training import distributed
from translator.training.schedule import LRSchedule
from translator.training.state import TrainState, random_state, set_random_state

log = logging.getLogger(__name__)


def training_payload(
    config: Config,
    data: TrainData,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: LRSchedule,
    state: TrainState,
    ranks: distributed.Ranks,
    ema: WeightEMA | None = None,
) -> dict[str, Any]:
    """Everything `--resume` needs, every rank's random state included (collective)."""
    averaged = {"ema": ema.state_dict()} if ema else {}
    return averaged | {
        "config": config.to_dict(),
        "tokenizers": data.tokenizer_paths,
        "tokenizer_models": data.tokenizer_models,
        "source_words": data.source_words,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "train_state": asdict(state),
        "rng": distributed.gather(random_state(), ranks),  # one per rank, in rank order
    }


def check_resumable(
    path: Path, payload: dict[str, Any], config: Config, tokenizer_models: dict, groups: int
) -> None:
    """One clear line if `payload` (read from `path`) cannot continue under `config`."""
    if from_dict(payload["config"]).model != config.model:
        raise UserError(
            f"cannot resume {path}: the config's [model] section differs from "
            "the one it was trained with"
        )
    if payload["tokenizer_models"] != tokenizer_models:
        raise UserError(
            f"cannot resume {path}: the tokenizers in {config.data.dir} "
            "differ from the ones it was trained with (was prepare re-run?)"
        )
    if "schedule" not in payload or len(payload["optimizer"]["param_groups"]) != groups:
        raise UserError(f"cannot resume {path}: it was written by an older version")


def load_training_state(
    payload: dict[str, Any],
    rank: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: LRSchedule,
    ema: WeightEMA | None = None,
) -> TrainState:
    """Put the weights, optimiser, schedule, average and `rank`'s random state back."""
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    schedule.load_state_dict(payload["schedule"])
    if ema and "ema" in payload:
        ema.load_state_dict(payload["ema"])
    elif ema:
        ema.restart()
        log.info("train.ema is new to this run: the average starts from the resumed weights")
    set_random_state(payload["rng"][rank % len(payload["rng"])])
    return TrainState(**payload["train_state"])


def warn_of_other_precision(payload: dict[str, Any], path: Path, precision: str) -> None:
    """A warning when the run resumed from `path` was trained in another precision."""
    trained_in = payload.get("precision")  # absent: saved before train.precision
    if trained_in and trained_in != precision:
        log.warning(
            f"warning: {path} was trained in {trained_in}; it continues in {precision}, so not "
            f"exactly as it would have (set train.precision = {trained_in!r} to match)"
        )


ARCHITECTURE = (
    "encoder_layers",
    "decoder_layers",
    "d_model",
    "heads",
    "ff_dim",
    "norm",
    "tie_embeddings",
    "activation",
    "output_bias",
)


def initial_weights(config: Config) -> dict[str, Any]:
    """The weights of train.init_from, checked against `config` and its prepared data; with
    train.init_layers "spread", evenly spaced layers of a deeper model."""
    path = Path(config.train.init_from)
    payload = checkpoint.load(path)
    trained = from_dict(payload["config"])
    spread = config.train.init_layers == "spread"
    differing = model_differences(trained, config, keys=LAYERS if spread else ())
    if spread:
        differing += deeper_layers(trained, config)
    if differing:
        raise UserError(
            f"cannot initialise from {path}: the config's [model] section differs from the "
            f"checkpoint's: {'; '.join(differing)}"
        )
    require_its_tokenizers(payload, path, config.data.dir)
    if not spread:
        return payload["model"]
    picks = {
        stack: spread_layers(getattr(trained.model, key), getattr(config.model, key))
        for stack, key in zip(STACKS, LAYERS, strict=True)
    }
    return layers_taken(payload["model"], picks)


LAYERS = ("encoder_layers", "decoder_layers")
STACKS = ("encoder", "decoder")  # their module lists in the model's state dict


def model_differences(trained: Config, config: Config, keys: tuple[str, ...] = ()) -> list[str]:
    """A line for each architecture key but `keys` that differs from the checkpoint's."""
    return [
        f"model.{key} is {getattr(config.model, key)!r} here and "
        f"{getattr(trained.model, key)!r} in the checkpoint"
        for key in ARCHITECTURE
        if key not in keys and getattr(config.model, key) != getattr(trained.model, key)
    ]


def deeper_layers(trained: Config, config: Config) -> list[str]:
    """What train.init_layers "spread" cannot do: make layers the checkpoint lacks."""
    return [
        f"model.{key} is {getattr(config.model, key)} here, more than the checkpoint's "
        f"{getattr(trained.model, key)} (train.init_layers spread takes fewer)"
        for key in LAYERS
        if getattr(config.model, key) > getattr(trained.model, key)
    ]


def spread_layers(have: int, want: int) -> list[int]:
    """`want` of `have` layers, evenly spaced: the first, and the last when want > 1 (as
    Shleifer and Rush's shrink and fine-tune copies them)."""
    if want == 1:
        return [0]
    return [round(i * (have - 1) / (want - 1)) for i in range(want)]


def layers_taken(weights: dict[str, Any], picks: dict[str, list[int]]) -> dict[str, Any]:
    """`weights` with layer picks[stack][i] renamed layer i, the other layers dropped."""
    taken = {}
    for name, value in weights.items():
        stack, _, rest = name.partition(".")
        if stack not in picks:
            taken[name] = value
            continue
        index, _, tail = rest.partition(".")
        for new, old in enumerate(picks[stack]):
            if int(index) == old:
                taken[f"{stack}.{new}.{tail}"] = value
    return taken


def require_its_tokenizers(payload: dict[str, Any], path: Path, data_dir: str) -> None:
    """One error line unless `data_dir` was prepared with the checkpoint's tokenizers."""
    try:
        recorded = json.loads(meta_file(data_dir).read_text(encoding="utf-8"))["tokenizers"]
    except (OSError, ValueError, KeyError):
        raise UserError(
            f"no prepared data in {data_dir} (no ids.json): run `translator prepare` first"
        ) from None
    models = payload["tokenizer_models"]
    other = [
        lang
        for lang, side in SIDES.items()
        if recorded.get(lang) != hashlib.sha256(models[side]).hexdigest()
    ]
    if other:
        raise UserError(
            f"cannot initialise from {path}: {data_dir} was prepared with other tokenizers "
            f"({' and '.join(other)} differ from the checkpoint's): prepare it with "
            f"--tokenizers-from {path}"
        )
