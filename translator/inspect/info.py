"""`translator info RUN_DIR_OR_CHECKPOINT`: what a trained model is — its size and config,
the data it was prepared from, and how far training got — as lines of text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from translator.config import from_dict
from translator.errors import UserError
from translator.model import checkpoint
from translator.model.rundir import RunDir


def checkpoint_of(path: Path) -> Path:
    """A checkpoint given as itself, or a run directory's last.pt (else its best.pt)."""
    if path.is_dir():
        run = RunDir(path)
        found = next((p for p in (run.last, run.best) if p.is_file()), None)
        if found is None:
            raise UserError(f"{path} holds no checkpoint (looked for {run.last} and {run.best})")
        return found
    return path


def describe(path: str | Path) -> list[str]:
    """The lines `translator info` prints for a run directory or a checkpoint."""
    ckpt = checkpoint_of(Path(path))
    payload = checkpoint.load(ckpt)
    config = from_dict(payload["config"])
    m, state = config.model, payload["model"]
    vocab = (state["src_embed.tokens.weight"].shape[0], state["tgt_embed.tokens.weight"].shape[0])
    # a tied output projection is the target embedding (an average stores it twice)
    tied = "project.weight" if m.tie_embeddings else None
    parameters = sum(t.numel() for k, t in state.items() if k != tied)
    lines = [
        f"checkpoint: {ckpt}" + (" (averaged)" if "averaged_from" in payload else ""),
        *origin_lines(payload, config),
        f"model: {parameters:,} parameters; {m.encoder_layers}+{m.decoder_layers} layers,"
        f" d_model {m.d_model}, {m.heads} heads, ff {m.ff_dim}, {m.norm}-norm, "
        f"{'tied' if m.tie_embeddings else 'separate'} output embedding"
        f"{' with a bias' if m.output_bias else ''}, {m.activation}, dropout {m.dropout}, "
        f"vocab {vocab[0]:,} en / {vocab[1]:,} zh"
        + (f", source prefix {config.data.src_prefix}" if config.data.src_prefix else ""),
        f"decoding: beam {config.decode.beam}, length penalty {config.decode.length_penalty}, "
        f"limit {config.decode.max_len_a:g} × source + {config.decode.max_len_b}",
    ]
    lines += data_lines(Path(config.data.dir))
    lines += training_lines(payload.get("train_state"), config)
    if "precision" in payload:
        lines.append(
            f"precision: trained in {payload['precision']} (train.precision "
            f"{config.train.precision})"
        )
    return lines


def origin_lines(payload: dict[str, Any], config) -> list[str]:
    """Where the weights came from."""
    lines = []
    if "imported" in payload:
        origin = payload["imported"]
        name = origin.get("name_or_path") or origin["from"]
        lines.append(
            f"imported from {name} ({origin['model_type']}, {origin['from']}); "
            f"licence: {origin.get('license') or 'not stated in its README.md'}"
        )
    if "release" in payload:
        release = payload["release"]
        lines.append(f"release of {release['from']}: {release['dtype']} weights, no training state")
    if config.train.init_from:
        lines.append(f"initialised from: {config.train.init_from} (fine-tuned)")
    if payload.get("weights_from") == "ema":
        lines.append(f"weights: the moving average of training's (train.ema {config.train.ema:g})")
    return lines


def data_lines(data_dir: Path) -> list[str]:
    stats_file = data_dir / "stats.json"
    if not stats_file.is_file():
        return [f"data: {data_dir} (no stats.json there)"]
    stats = json.loads(stats_file.read_text(encoding="utf-8"))
    splits = stats.get("splits", {})
    return [
        f"data: {data_dir}: {stats.get('pairs', 0):,} pairs from {stats.get('rows_read', 0):,} "
        f"rows (train {splits.get('train', 0):,}, valid {splits.get('valid', 0):,}, test "
        f"{splits.get('test', 0):,}); dropped {stats.get('malformed', 0):,} malformed, "
        f"{stats.get('filtered', 0):,} filtered, {stats.get('duplicates', 0):,} duplicates; "
        f"{stats.get('traditional_converted', 0):,} traditional lines converted"
    ]


def training_lines(train_state: dict[str, Any] | None, config) -> list[str]:
    if not train_state:
        return ["training: no training state in this checkpoint"]
    history = train_state.get("history", [])
    done = [row for row in history if row.get("complete")]
    lines = [
        f"training: {len(done)} epochs complete, {train_state['step']:,} updates, "
        f"{train_state.get('elapsed', 0.0) / 60:.1f} minutes (max_epochs "
        f"{config.train.max_epochs}, max_tokens {config.train.max_tokens}, lr {config.train.lr:g})"
    ]
    if history:
        best, last = max(history, key=lambda row: row["valid_bleu"]), history[-1]
        lines.append(
            f"best: epoch {best['epoch']}, validation BLEU {best['valid_bleu']:.2f} "
            f"(loss {best['valid_loss']:.3f}); last: epoch {last['epoch']}, BLEU "
            f"{last['valid_bleu']:.2f}, loss {last['valid_loss']:.3f}"
        )
    return lines
