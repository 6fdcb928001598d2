"""Us against the peer our users would otherwise reach for: eole (OpenNMT-py's successor),
trained and decoded side by side on the same CPU
(docs/performance.md#against-eole-scriptsbench_peerpy).

    python scripts/bench_peer.py --minutes 3      # a quick look
    python scripts/bench_peer.py --minutes 20     # the table in the docs

1. eole 0.6.4 goes into a virtual environment of its own (--eole-env, beside the project's,
   never in its dependencies): `torch==2.13.0` first (the CPU wheel; eole's own requirement
   would pull a CUDA build), then eole and `aiohttp` (its CLI imports it without declaring
   it). Made once, reused after.
2. The same data for both: the config's prepared directory (`translator prepare` if it is
   not there), its train split as text and its SentencePiece models, which eole applies
   with its `sentencepiece` transform. The same shape (the config's: 3+3 layers, d_model
   256, 4 heads, ff 1024, pre-norm, tied decoder embeddings, 1,024-token batches, dropout,
   label smoothing 0.1, warm-up, and eole's noam schedule scaled to peak at our learning
   rate: its recipes' scale 2 peaks at 4e-3 for d_model 256, where it stalled at a
   perplexity near 50), each toolkit's own defaults for the rest, and the same threads
   (PyTorch's default on this CPU for both).
3. Training: each for --minutes. Ours: `translator train --max-minutes M`, its model the
   recipe's (train.final: the last 5 epochs' mean). eole saves no checkpoint when interrupted, so a
   timed probe of --probe-seconds measures its updates a second (after its start-up) and
   its `train_steps` is set to fill the minutes. Target tokens/s: the median of each
   toolkit's own reports (our epochs, eole's every 20 updates), the first left out (start-up).
4. Decoding the test split greedy and with beam 5, each as its users run it, with the model
   loaded, best of --repeats: `translator translate --input … --report-time` with its
   defaults (after `translator export`, so `decode.engine auto` finds the CTranslate2
   export beside the checkpoint), ours on our own engine (`--engine torch`, its precision
   default), and ours in fp32 (`--engine torch --precision fp32`, the reference for BLEU);
   `eole predict -report_time` (its whole prediction: step 0 and the rest). BLEU: sacrebleu
   (tokenize zh) against the test split's references, the same call for every output.

It prints one table and ends with `ratios: train=X greedy=Y beam5=Z bleu=D` (ours with its
defaults ÷ eole; D: our BLEU with beam 5 minus eole's). Everything it writes goes under
--work (runs/bench_peer). Each command it runs (eole's, ours, pip's) runs in a session of its
own, and whatever it leaves running (eole's data workers) is ended with it, however the
script ends (common.py's `session`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    ROOT,
    call,
    captured,
    cpu_name,
    end_on_sigterm,
    load_config,
    session,
    translator_command,
)

from translator.model.rundir import RunDir

EOLE = "eole==0.6.4"
TORCH = "torch==2.13.0"  # the Makefile's pin: the CPU wheel


@dataclass
class Row:
    """One toolkit and way of decoding: sentences/s for each search and their BLEU."""

    name: str
    speed: dict[str, float] = field(default_factory=dict)  # "greedy" / "beam5" → sent/s
    bleu: dict[str, float] = field(default_factory=dict)
    train_tok_s: float | None = None


# ---- reading what each toolkit reports ------------------------------------------------


def our_train_rates(log: str) -> list[float]:
    """Target tokens/s of each epoch in `translator train`'s log."""
    pattern = r"epoch \d+(?: \(cut short\))?:.*?, (\d+) tgt tok/s"
    return [float(x) for x in re.findall(pattern, log)]


def eole_reports(log: str) -> list[tuple[int, float, float]]:
    """(update, target tokens/s, seconds since start) of each report in eole's train log."""
    pattern = r"Step (\d+)/\s*\d+;.*?(\d+)/\s*(\d+) tok/s;\s*(\d+) sec"
    return [(int(s), float(t), float(sec)) for s, _, t, sec in re.findall(pattern, log)]


def steady(rates: list[float]) -> float:
    """The median rate, the first report (start-up) left out when there are others."""
    return statistics.median(rates[1:] if len(rates) > 1 else rates)


def updates_per_second(reports: list[tuple[int, float, float]]) -> float:
    """eole's updates a second between its first report and its last."""
    (s0, _, t0), (s1, _, t1) = reports[0], reports[-1]
    return (s1 - s0) / max(t1 - t0, 1e-9)


def eole_seconds(log: str) -> float:
    """eole predict's whole prediction time from its -report_time lines (step 0 + the rest)."""
    step0 = re.search(r"Step 0 time \(s\): ([\d.]+)", log)
    rest = re.search(r"Subsequent prediction time including all \(s\): ([\d.]+)", log)
    if rest is None:
        raise RuntimeError("eole predict reported no time:\n" + log[-2000:])
    return float(rest.group(1)) + (float(step0.group(1)) if step0 else 0.0)


def our_seconds(log: str) -> float:
    """`translator translate --report-time`'s seconds."""
    found = re.search(r"translated [\d,]+ lines in ([\d.]+) s", log)
    if found is None:
        raise RuntimeError("translator translate reported no time:\n" + log[-2000:])
    return float(found.group(1))


def table(rows: list[Row], sentences: int) -> list[str]:
    """The printed table, and the ratios line last: the first row (ours, defaults) ÷ the last
    (eole)."""
    lines = [
        f"decoding {sentences:,} test sentences; training target tokens/s",
        f"  {'':44s} {'train tok/s':>11s} {'greedy sent/s':>13s} {'beam5 sent/s':>12s} "
        f"{'BLEU greedy':>11s} {'BLEU beam5':>10s}",
    ]
    for row in rows:
        train = f"{row.train_tok_s:,.0f}" if row.train_tok_s else "–"
        cells = [f"{row.speed.get(s, 0):,.1f}" for s in ("greedy", "beam5")]
        bleus = [f"{row.bleu.get(s, 0):.2f}" for s in ("greedy", "beam5")]
        lines.append(
            f"  {row.name:44s} {train:>11s} {cells[0]:>13s} {cells[1]:>12s} "
            f"{bleus[0]:>11s} {bleus[1]:>10s}"
        )
    ours, eole = rows[0], rows[-1]
    trained = next(r.train_tok_s for r in rows if r.train_tok_s)
    lines.append(
        f"ratios: train={trained / eole.train_tok_s:.2f} "
        f"greedy={ours.speed['greedy'] / eole.speed['greedy']:.2f} "
        f"beam5={ours.speed['beam5'] / eole.speed['beam5']:.2f} "
        f"bleu={ours.bleu['beam5'] - eole.bleu['beam5']:+.2f}"
    )
    return lines


# ---- running them ---------------------------------------------------------------------


def run(command: list[str], log: Path | None = None, **kwargs) -> str:
    """Run `command` (in the project root, in a session of its own: nothing it starts
    outlives it), its stdout and stderr kept in `log`; its output."""
    done = captured(command, cwd=ROOT, env=os.environ | kwargs.pop("env", {}))
    output = done.stdout + done.stderr
    if log is not None:
        log.write_text(output, encoding="utf-8")
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{output[-3000:]}")
    return output


def eole_env(path: Path) -> Path:
    """eole's own environment at `path`, made once; its `eole` command."""
    eole = path / "bin" / "eole"
    if eole.is_file():
        return eole
    print(f"installing {EOLE} into {path} (once)", flush=True)
    call([sys.executable, "-m", "venv", str(path)], check=True)
    pip = [str(path / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    call([*pip, TORCH], check=True)
    call([*pip, EOLE, "aiohttp"], check=True)
    return eole


def eole_config(work: Path, data: Path, model_cfg, train_cfg, steps: int) -> Path:
    """eole's YAML for the config's shape and data, training `steps` updates."""
    text = f"""save_data: {work}/data
overwrite: true
seed: 1
report_every: 20
src_vocab: {work}/vocab.src
tgt_vocab: {work}/vocab.tgt
src_vocab_size: {model_cfg.src_vocab}
tgt_vocab_size: {model_cfg.tgt_vocab}
data:
  corpus_1:
    path_src: {data}/train.en
    path_tgt: {data}/train.zh
transforms: [sentencepiece, filtertoolong]
transforms_configs:
  sentencepiece:
    src_subword_model: {data}/spm.en.model
    tgt_subword_model: {data}/spm.zh.model
  filtertoolong:
    src_seq_length: 256
    tgt_seq_length: 256
training:
  model_path: {work}/model
  train_steps: {steps}
  save_checkpoint_steps: {steps}
  batch_type: tokens
  batch_size: {train_cfg.max_tokens}
  optim: adamw
  learning_rate: {model_cfg.noam_scale}
  decay_method: noam
  warmup_steps: {train_cfg.warmup_steps}
  dropout: [{model_cfg.dropout}]
  attention_dropout: [{model_cfg.attention}]
  label_smoothing: {train_cfg.label_smoothing}
  param_init_method: xavier_uniform
  normalization: tokens
model:
  architecture: transformer
  hidden_size: {model_cfg.d_model}
  layers: {model_cfg.encoder_layers}
  heads: {model_cfg.heads}
  transformer_ff: {model_cfg.ff_dim}
  share_decoder_embeddings: {str(model_cfg.tie_embeddings).lower()}
  embeddings:
    word_vec_size: {model_cfg.d_model}
    position_encoding_type: SinusoidalInterleaved
"""
    path = work / f"config-{steps}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def train_eole(eole: Path, work: Path, config, minutes: float, probe_seconds: float) -> float:
    """Train eole for `minutes` (its steps sized by a probe); its steady target tokens/s."""
    attention = config.model.attention_dropout
    shape = argparse.Namespace(
        **vars(config.model), src_vocab=config.data.src_vocab_size,
        tgt_vocab=config.data.tgt_vocab_size,
        attention=config.model.dropout if attention < 0 else attention,
        # noam's peak, scale × d_model^-0.5 × warmup^-0.5, set to our peak (train.lr)
        noam_scale=config.train.lr * (config.model.d_model * config.train.warmup_steps) ** 0.5,
    )  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    data = Path(config.data.dir).resolve()
    probe = eole_config(work, data, shape, config.train, 1_000_000)
    run([str(eole), "build_vocab", "-config", str(probe), "-n_sample", "-1"], work / "vocab.log")
    probe_log = work / "probe.log"
    command = [str(eole), "train", "-config", str(probe)]
    with (
        probe_log.open("w") as sink,
        session(command, stdout=sink, stderr=subprocess.STDOUT) as process,
    ):  # leaving it kills the probe and its data workers, and waits for them
        deadline = time.monotonic() + probe_seconds
        while process.poll() is None and time.monotonic() < deadline + 180:
            time.sleep(1)
            enough = len(eole_reports(probe_log.read_text())) >= 3
            if enough and time.monotonic() >= deadline:
                break
    reports = eole_reports(probe_log.read_text())
    if len(reports) < 3:
        raise RuntimeError(f"eole's probe reported fewer than 3 intervals: see {probe_log}")
    reports = reports[1:]  # the first interval holds its start-up
    startup = reports[0][2] - reports[0][0] / updates_per_second(reports)
    steps = int(updates_per_second(reports) * max(minutes * 60 - startup, 60))
    print(f"eole: {updates_per_second(reports):.2f} updates/s in the probe: {steps:,} steps")
    full = eole_config(work, data, shape, config.train, steps)
    log = run([str(eole), "train", "-config", str(full)], work / "train.log")
    return steady([t for _, t, _ in eole_reports(log)])


def train_ours(config_file: str, work: Path, minutes: float) -> tuple[Path, float]:
    """Train ours for `minutes`: the run's model (train.final, as the recipe names it) and
    its steady target tokens/s."""
    run_dir = work / "ours"
    values = ["--set", f"train.run_dir={run_dir}"]
    log = run(
        translator_command("train", "-c", config_file, "--max-minutes", str(minutes), *values),
        work / "ours-train.log",
    )
    return RunDir(run_dir).final.path, steady(our_train_rates(log))


def bleu(hypotheses: Path, references: Path) -> float:
    import sacrebleu

    hyp = hypotheses.read_text(encoding="utf-8").splitlines()
    ref = references.read_text(encoding="utf-8").splitlines()
    return sacrebleu.corpus_bleu(hyp, [ref], tokenize="zh").score


def decode_ours(
    config_file: str, checkpoint: Path, src: Path, ref: Path, out: Path, flags, repeats: int
) -> tuple[dict, dict]:
    """sent/s (best of `repeats`) and BLEU of `translator translate` with `flags`."""
    speed, scores = {}, {}
    sentences = len(src.read_text(encoding="utf-8").splitlines())
    for search, beam in (("greedy", 1), ("beam5", 5)):
        hyp = out.with_suffix(f".{search}.txt")
        command = translator_command(
            "translate", "-c", config_file, "--checkpoint", str(checkpoint), "--input", str(src),
            "--output", str(hyp), "--beam", str(beam), "--report-time", *flags,
        )  # fmt: skip
        log = out.with_suffix(f".{search}.log")
        seconds = min(our_seconds(run(command, log)) for _ in range(repeats))
        speed[search], scores[search] = sentences / seconds, bleu(hyp, ref)
    return speed, scores


def decode_eole(eole: Path, work: Path, src: Path, ref: Path, repeats: int) -> tuple[dict, dict]:
    speed, scores = {}, {}
    sentences = len(src.read_text(encoding="utf-8").splitlines())
    for search, beam in (("greedy", 1), ("beam5", 5)):
        hyp = work / f"eole.{search}.txt"
        command = [
            str(eole), "predict", "-model_path", str(work / "model"), "-src", str(src),
            "-output", str(hyp), "-beam_size", str(beam), "-report_time",
        ]  # fmt: skip
        log = work / f"eole.{search}.log"
        seconds = min(eole_seconds(run(command, log)) for _ in range(repeats))
        speed[search], scores[search] = sentences / seconds, bleu(hyp, ref)
    return speed, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", default="configs/tatoeba-cpu.toml")
    parser.add_argument("--minutes", type=float, default=3.0, help="training minutes each")
    parser.add_argument("--work", type=Path, default=ROOT / "runs/bench_peer")
    parser.add_argument("--eole-env", type=Path, default=ROOT / "runs/eole-env")
    parser.add_argument("--probe-seconds", type=float, default=100)
    parser.add_argument("--repeats", type=int, default=2, help="decoding runs, best of")
    args = parser.parse_args()
    end_on_sigterm()  # a SIGTERM ends every command's process group too, as Ctrl-C does

    config = load_config(args.config)
    eole = eole_env(args.eole_env.resolve())
    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    work = args.work.resolve()
    data = Path(config.data.dir)
    if not (data / "test.en").is_file():
        run(translator_command("prepare", "-c", args.config), work / "prepare.log")
    src, ref = (data / "test.en").resolve(), (data / "test.zh").resolve()

    print(f"training ours {args.minutes:g} minutes", flush=True)
    checkpoint, ours_rate = train_ours(args.config, work, args.minutes)
    print(f"training eole {args.minutes:g} minutes", flush=True)
    eole_rate = train_eole(eole, work / "eole", config, args.minutes, args.probe_seconds)

    run(translator_command("export", str(checkpoint)), work / "export.log")
    ways = [
        ("ours, defaults (translator translate)", []),
        ("ours, our engine (--engine torch)", ["--engine", "torch"]),
        ("ours, our engine in int8 (--precision int8)",
         ["--engine", "torch", "--precision", "int8"]),
        ("ours, our engine in fp32 (--precision fp32)",
         ["--engine", "torch", "--precision", "fp32"]),
    ]  # fmt: skip
    rows = []
    for i, (name, flags) in enumerate(ways):
        speed, scores = decode_ours(
            args.config, checkpoint, src, ref, work / f"ours{i}", flags, args.repeats
        )
        rows.append(Row(name, speed, scores))
        engine = re.search(r"^engine: .*$", (work / f"ours{i}.greedy.log").read_text(), re.M)
        print(f"  {name}: {engine.group(0) if engine else '?'}", flush=True)
    rows[0].train_tok_s = ours_rate
    speed, scores = decode_eole(eole, work / "eole", src, ref, args.repeats)
    rows.append(Row("eole 0.6.4 (eole predict)", speed, scores, eole_rate))
    print(f"\nmachine: {cpu_name()}, {os.cpu_count()} cores; {args.minutes:g} minutes each")
    print("\n".join(table(rows, len(src.read_text(encoding="utf-8").splitlines()))))


if __name__ == "__main__":
    main()
