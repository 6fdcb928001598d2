"""Teacher and students side by side on one machine: test BLEU with beam 5 and greedy,
decoding sentences/s in PyTorch and in CTranslate2 int8 (greedy), one run.

    python scripts/studies/distill.py -c configs/tatoeba-cpu.toml \\
        "teacher=runs/tatoeba-cpu-60/checkpoints/ema.pt" \\
        "(a) distilled=runs/student-cpu/checkpoints/ema.pt" \\
        "(b) original=runs/student-original/checkpoints/ema.pt" \\
        "(c) tatoeba-cpu=runs/tatoeba-cpu/checkpoints/average5.pt"

Each row is NAME=CHECKPOINT[@ALPHA]: beam 5 uses ALPHA as its length penalty (default: the
checkpoint's own decode.length_penalty). The test split of the config's data.dir is
translated, each distinct English sentence once and scored against all its translations
(sacrebleu, tokenize zh), through the same text path as `translate` (split off: a line is
one sentence). Each row runs in a fresh process. Speed is the median of `--repeats` passes
over those sentences (after one untimed), batches of decode.batch_size (256) for PyTorch;
CTranslate2 runs the int8 export of the checkpoint as two translators of one thread each,
batches of 32 (its fastest on 2 cores in scripts/bench.py). The baseline of the ratios is
the last row's beam 5 (`--baseline` picks another): issue 47 asks a distilled student's
greedy decoding for 3× its sentences/s at at least its BLEU, and of the int8 export at
most 0.5 BLEU below PyTorch's greedy.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from translator.data.layout import read_references, split_file
from translator.deploy.export import export
from translator.evaluation.scoring import score
from translator.inference.text import Translator
from translator.runtime import keep_freed_memory

# scripts/common.py, the helpers every script shares, loaded by its path: Python puts the
# study's own folder first on the module path, not scripts/ (docs/architecture.md#the-scripts)
_spec = importlib.util.spec_from_file_location("common", Path(__file__).parents[1] / "common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

REPEAT_SECONDS = 120.0  # a row's timed passes stop once they have taken this long


@dataclass
class Row:
    name: str
    params: int
    alpha: float
    bleu: dict  # search → BLEU
    per_s: dict  # search → sentences/s


def timed(translate, sources: list[str], repeats: int) -> tuple[list[str], float]:
    """The translations and the median sentences/s of `repeats` passes (after one untimed
    pass, which builds the kernels of each batch shape; fewer once REPEAT_SECONDS have
    passed)."""
    translate(sources)
    out, times = common.timed_runs(lambda: translate(sources), repeats, REPEAT_SECONDS)
    return out, len(sources) / statistics.median(times)


def measure(name: str, spec: str, config, sources, references, repeats: int) -> tuple:
    """One row's fields, as plain values: main runs it `alone`, in a fresh process. Each
    model is opened as `translate` opens it (`Translator.from_checkpoint`)."""
    keep_freed_memory()
    path, _, alpha = spec.partition("@")
    own = Translator.from_checkpoint(path, "cpu", engine="torch", precision="fp32")
    params = sum(t.numel() for t in own.engine.model.state_dict().values())  # as saved
    alpha = float(alpha) if alpha else own.decode_cfg.length_penalty  # its own decode's
    del own
    decode = replace(
        config.decode, split=False, nbest=0, batch_size=256, length_penalty=alpha, precision="fp32"
    )
    bleu, per_s = {}, {}
    for beam in (5, 1):
        translator = Translator.from_checkpoint(
            path, "cpu", replace(decode, beam=beam), engine="torch"
        )
        out, per_s[f"torch beam {beam}"] = timed(translator.translate, sources, repeats)
        bleu[f"torch beam {beam}"] = score(out, references).bleu
    with tempfile.TemporaryDirectory() as tmp:
        export(Path(path), Path(tmp) / "int8", "int8")
        greedy = replace(decode, beam=1, batch_size=32, precision="int8")
        int8 = {"engine": "ctranslate2", "model_dir": str(Path(tmp) / "int8")}
        ct2 = Translator.from_checkpoint(path, "cpu", replace(greedy, **int8, threads=1, workers=2))
        out, per_s["ct2 int8 greedy"] = timed(ct2.translate, sources, repeats)
        bleu["ct2 int8 greedy"] = score(out, references).bleu
    print(f"{name}: {bleu} {per_s}", flush=True)
    return name, params, alpha, bleu, per_s


def table(rows: list[Row], baseline: Row) -> str:
    base = baseline.per_s["torch beam 5"]
    lines = [
        "| model | parameters | α | BLEU beam 5 | BLEU greedy | PyTorch beam 5, sent/s "
        "| PyTorch greedy, sent/s | greedy ÷ baseline beam 5 | CT2 int8 greedy, sent/s "
        "| CT2 int8 greedy BLEU (− PyTorch greedy) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        loss = r.bleu["ct2 int8 greedy"] - r.bleu["torch beam 1"]
        lines.append(
            f"| {r.name} | {r.params / 1e6:.1f}M | {r.alpha:g} | {r.bleu['torch beam 5']:.2f} "
            f"| {r.bleu['torch beam 1']:.2f} | {r.per_s['torch beam 5']:,.0f} "
            f"| {r.per_s['torch beam 1']:,.0f} | {r.per_s['torch beam 1'] / base:.2f} "
            f"| {r.per_s['ct2 int8 greedy']:,.0f} | {r.bleu['ct2 int8 greedy']:.2f} ({loss:+.2f}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", nargs="+", metavar="NAME=CHECKPOINT[@ALPHA]")
    parser.add_argument("-c", "--config", default="configs/tatoeba-cpu.toml")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=int, default=-1, help="row index (default: last)")
    args = parser.parse_args()
    config = common.load_config(args.config, args.overrides)
    if not split_file(config.data.dir, "test", "en").is_file():
        sys.exit(f"error: no prepared data in {config.data.dir}: run `translator prepare` first")
    sources, references = read_references(config.data.dir, "test")
    rows = []
    for item in args.rows:
        name, _, spec = item.partition("=")
        fields = common.alone(measure, name, spec, config, sources, references, args.repeats)
        rows.append(Row(*fields))
    print(f"\n{len(sources):,} test sentences of {config.data.dir}; {os.cpu_count()} CPU cores\n")
    print(table(rows, rows[args.baseline]))


if __name__ == "__main__":
    main()
