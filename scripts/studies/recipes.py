"""The recipe study behind docs/quality.md's tables: train variants of a config, one
change each, with the same data, seed and time budget, and score each on the test split.

    python scripts/studies/recipes.py --minutes 20         # every variant not yet in results
    python scripts/studies/recipes.py --minutes 20 --only baseline lr-2e-3
    python scripts/studies/recipes.py --rescore            # score the trained variants again
    python scripts/studies/recipes.py --table              # the results as a Markdown table
    python scripts/studies/recipes.py -c configs/tatoeba-cpu.toml --set "train.device='cuda'" …

`--set` changes every variant (the base config's prepared data is still the one the
variants share). Several studies may train at once on one machine (a GPU has room for
many small runs), each with its own --out, once `--prepare-only` has written the data
every one of them reads.

Each variant's row is written to runs/study/results.tsv as it finishes (a rerun with --only
replaces it), so an interrupted study resumes where it stopped. Keep the machine otherwise
idle while it runs: the budget is wall-clock time (`touch runs/study/hold` makes the study
wait before the next variant's training, until the file is removed). Choose between
variants by validation BLEU; test BLEU is reported.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import shutil
import sys
import time
from pathlib import Path

from translator.corpus.preparer import prepare
from translator.data.ids import SubwordSampling, encode_splits, up_to_date
from translator.data.layout import tokenizer_file
from translator.errors import UserError
from translator.evaluation.evaluator import evaluate_files
from translator.model.checkpoint import average_last
from translator.model.rundir import RunDir
from translator.runtime import keep_freed_memory, worker_count
from translator.training.trainer import train

# scripts/common.py, the helpers every script shares, loaded by its path: Python puts the
# study's own folder first on the module path, not scripts/ (docs/architecture.md#the-scripts)
_spec = importlib.util.spec_from_file_location("common", Path(__file__).parents[1] / "common.py")
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

AVERAGE_LAST = 5  # also score the mean of the last 5 epochs' weights (translator average)

LEVERS = ["train.plateau_metric='bleu'", "train.ema=0.999", "data.subword_sampling=4"]
# name → config overrides (section.key=value, as for --set)
VARIANTS: dict[str, list[str]] = {
    "baseline": [],
    "seed-2": ["train.seed=2"],  # the baseline again with another seed: the noise floor
    "lr-2e-3": ["train.lr=2e-3"],
    "batch-512": ["train.max_tokens=512"],
    "warmup-300": ["train.warmup_steps=300"],
    "dropout-0.2": ["model.dropout=0.2"],
    "dropout-0": ["model.dropout=0.0"],
    "dropout-0.3": ["model.dropout=0.3"],
    "label-smoothing-0": ["train.label_smoothing=0.0"],
    "vocab-2k": ["data.src_vocab_size=2000", "data.tgt_vocab_size=2000"],
    "vocab-3k": ["data.src_vocab_size=3000", "data.tgt_vocab_size=3000"],
    "src-2k": ["data.src_vocab_size=2000"],  # English alone (the Chinese side stays)
    "src-4k": ["data.src_vocab_size=4000"],
    "src-6k": ["data.src_vocab_size=6000"],
    "vocab-4k": ["data.src_vocab_size=4000", "data.tgt_vocab_size=4000"],
    "vocab-8k": ["data.src_vocab_size=8000", "data.tgt_vocab_size=8000"],
    "vocab-16k": ["data.src_vocab_size=16000", "data.tgt_vocab_size=16000"],
    "no-byte-fallback": ["data.byte_fallback=false"],
    "untied-embeddings": ["model.tie_embeddings=false"],
    "post-norm": ["model.norm='post'"],
    "layers-2+2": ["model.encoder_layers=2", "model.decoder_layers=2"],
    "layers-4+4": ["model.encoder_layers=4", "model.decoder_layers=4"],
    "layers-6+6": ["model.encoder_layers=6", "model.decoder_layers=6"],
    "width-384": ["model.d_model=384", "model.heads=6", "model.ff_dim=1536"],
    "width-320": ["model.d_model=320", "model.ff_dim=1280"],
    "batch-2048": ["train.max_tokens=2048"],
    "lr-5e-4": ["train.lr=5e-4"],
    "warmup-4000": ["train.warmup_steps=4000"],
    "label-smoothing-0.2": ["train.label_smoothing=0.2"],
    "plateau-patience-1": ["train.plateau_patience=1"],
    # the levers of quality that grows with compute (docs/quality.md)
    "plateau-bleu": ["train.plateau_metric='bleu'"],
    "plateau-bleu-p4": ["train.plateau_metric='bleu'", "train.plateau_patience=4"],
    "ema-0.999": ["train.ema=0.999"],
    "ema-0.9995": ["train.ema=0.9995"],
    "ema-0.9998": ["train.ema=0.9998"],
    "subword-4": ["data.subword_sampling=4"],
    "levers": LEVERS,
    "levers-seed-2": [*LEVERS, "train.seed=2"],
    "levers-dropout-0.2": [*LEVERS, "model.dropout=0.2"],
    "levers-dropout-0.2-seed-2": [*LEVERS, "model.dropout=0.2", "train.seed=2"],
    "levers-dropout-0.3": [*LEVERS, "model.dropout=0.3"],
    # one lever taken away from a config that has them all (configs/tatoeba-cpu-60.toml)
    "no-ema": ["train.ema=0", "train.final='best'"],
    "plateau-loss": ["train.plateau_metric='loss'"],
    "no-subword": ["data.subword_sampling=0"],
    "dropout-0.1": ["model.dropout=0.1"],
}
N = AVERAGE_LAST
FIELDS = (  # newstest2021: the chosen model's, the EMA if there is one, else the average
    "variant changes minutes epochs updates tokens_per_s valid_bleu test_bleu test_chrf "
    f"test_bleu_beam5 test_chrf_beam5 valid_bleu_avg{N} test_bleu_avg{N} test_bleu_avg{N}_beam5 "
    f"test_bleu_avg{N}_beam5_1ref valid_bleu_ema test_bleu_ema test_bleu_ema_beam5 "
    f"test_bleu_ema_beam5_1ref newstest2021_bleu_beam5 test_chrf_avg{N}_beam5 test_chrf_ema_beam5"
).split()
NEWS = common.WMT / "newstest2021.en-zh"  # .en, .refA.zh, .refB.zh
HOLD = "hold"  # while this file is in --out, no new variant starts training (see main)


def data_dir(config, base) -> str:
    """Prepared data is shared by variants with the base config's tokenizer settings and
    sampling; one that samples otherwise has its own copy of the base data (sampled by
    `train`)."""
    tokenizers = lambda c: (c.src_vocab_size, c.tgt_vocab_size, c.byte_fallback)  # noqa: E731
    d = config.data
    sampled = f"-sw{d.subword_sampling}-{d.subword_sides}-{d.subword_alpha:g}"
    sampled = sampled if d.subword_sampling else "-sw0"
    if tokenizers(d) == tokenizers(base.data):
        if SubwordSampling.of(d) == SubwordSampling.of(base.data):
            return base.data.dir
        copy = Path(base.data.dir + sampled)
        if not copy.is_dir():
            if not tokenizer_file(base.data.dir, "zh").is_file():
                prepare(base.data)
            shutil.copytree(base.data.dir, copy)
        return str(copy)
    src, tgt, byte_fallback = tokenizers(d)
    size = lambda n: f"{n // 1000}k" if n % 1000 == 0 else str(n)  # noqa: E731
    name = f"{base.data.dir}-v{size(src)}-{size(tgt)}" + ("" if byte_fallback else "-nobf")
    return name + (sampled if d.subword_sampling else "")


def variant_config(base_config: Path, name: str, minutes: float, out: Path, extra=()):
    overrides = [
        *VARIANTS[name],
        *extra,
        f"train.run_dir='{out / name}'",
        f"train.max_minutes={minutes}",
        f"train.keep_last={AVERAGE_LAST}",
    ]
    config = common.load_config(base_config, overrides)
    config.data.dir = data_dir(config, common.load_config(base_config))
    return config


def describe(name: str, extra=()) -> str:
    return " ".join(f"`{change}`" for change in [*VARIANTS[name], *extra]) or "none"


def prepare_data(config) -> None:
    """The variant's prepared data, its sampled encodings too (which `train` would write)."""
    if not tokenizer_file(config.data.dir, "zh").is_file():
        prepare(config.data)
    sampling = SubwordSampling.of(config.data)
    if not up_to_date(config.data.dir, sampling):
        encode_splits(config.data.dir, worker_count(config.data.workers), sampling)


def run_variant(config, name: str, extra=()) -> dict:
    """Train one variant from scratch; its row without the test scores."""
    prepare_data(config)
    started = time.perf_counter()
    result = train(config, overwrite=True, progress=False)
    history = result.history
    return {
        "variant": name,
        "changes": describe(name, extra),
        "minutes": f"{(time.perf_counter() - started) / 60:.1f}",
        "epochs": result.state.epoch,
        "updates": result.state.step,
        "tokens_per_s": f"{sum(r['train_tokens_per_s'] for r in history) / len(history):.0f}",
        "valid_bleu": f"{result.best_bleu:.2f}",
    }


def score_run(config, news: Path | None) -> dict:
    """Score a trained variant's best checkpoint (greedy and beam 5) and the average of its
    last epochs (greedy on valid and test, beam 5 on test) from the checkpoints in its run
    directory. Every score is multi-reference but the one marked 1ref (first reference)."""
    best = RunDir(config.train.run_dir).best
    averaged = average_last(config.train.run_dir, AVERAGE_LAST)
    config.decode.beam = 1
    greedy = evaluate_files(config, best).scores
    greedy_averaged = evaluate_files(config, averaged).scores
    valid_averaged = evaluate_files(config, averaged, split="valid").scores
    config.decode.beam = 5
    beam = evaluate_files(config, best).scores
    beam_averaged = evaluate_files(config, averaged).scores
    return (
        {
            "test_bleu": f"{greedy.bleu:.2f}",
            "test_chrf": f"{greedy.chrf:.2f}",
            "test_bleu_beam5": f"{beam.bleu:.2f}",
            "test_chrf_beam5": f"{beam.chrf:.2f}",
            f"valid_bleu_avg{AVERAGE_LAST}": f"{valid_averaged.bleu:.2f}",
            f"test_bleu_avg{AVERAGE_LAST}": f"{greedy_averaged.bleu:.2f}",
            f"test_bleu_avg{AVERAGE_LAST}_beam5": f"{beam_averaged.bleu:.2f}",
            f"test_bleu_avg{AVERAGE_LAST}_beam5_1ref": f"{beam_averaged.bleu_1ref:.2f}",
            f"test_chrf_avg{AVERAGE_LAST}_beam5": f"{beam_averaged.chrf:.2f}",
        }
        | score_ema(config)
        | score_news(
            config, RunDir(config.train.run_dir).ema if config.train.ema else averaged, news
        )
    )


def score_ema(config) -> dict:
    """The moving average's checkpoint (train.ema), scored as the average is."""
    ema = RunDir(config.train.run_dir).ema
    if not config.train.ema or not ema.is_file():
        return {}
    config.decode.beam = 1
    greedy = evaluate_files(config, ema).scores
    valid = evaluate_files(config, ema, split="valid").scores
    config.decode.beam = 5
    beam = evaluate_files(config, ema).scores
    return {
        "valid_bleu_ema": f"{valid.bleu:.2f}",
        "test_bleu_ema": f"{greedy.bleu:.2f}",
        "test_bleu_ema_beam5": f"{beam.bleu:.2f}",
        "test_bleu_ema_beam5_1ref": f"{beam.bleu_1ref:.2f}",
        "test_chrf_ema_beam5": f"{beam.chrf:.2f}",
    }


def score_news(config, checkpoint: Path, news: Path | None) -> dict:
    """newstest2021 (news: the files' prefix) against refA and refB, beam 5 (it should not
    fall); none when news is None or its files are absent."""
    if news is None:
        return {}
    source = news.with_name(news.name + ".en")
    refs = [news.with_name(news.name + f".ref{r}.zh") for r in "AB"]
    if not source.is_file() or not all(r.is_file() for r in refs):
        return {}
    config.decode.beam = 5
    scores = evaluate_files(config, checkpoint, src=source, refs=refs).scores
    return {"newstest2021_bleu_beam5": f"{scores.bleu:.2f}"}


def read_results(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def write_results(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, delimiter="\t", restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def print_table(rows: list[dict]) -> None:
    n = AVERAGE_LAST
    print(
        "| variant | change | epochs, updates | best: valid BLEU | best: test BLEU "
        f"| best: test BLEU, beam 5 | average of last {n}: valid BLEU "
        f"| average of last {n}: test BLEU | average of last {n}: test BLEU, beam 5 "
        "| the same, first reference only | EMA: valid BLEU | EMA: test BLEU, beam 5 "
        "| EMA: first reference only | newstest2021, beam 5 |"
    )
    print("| --- " * 14 + "|")
    order = list(VARIANTS)
    for r in sorted(rows, key=lambda r: order.index(r["variant"]) if r["variant"] in order else 99):
        cell = {key: r.get(key) or "–" for key in FIELDS}
        print(
            f"| {r['variant']} | {r['changes']} | {cell['epochs']}, {r['updates']} | "
            f"{r['valid_bleu']} | {r['test_bleu']} | {r['test_bleu_beam5']} | "
            f"{cell[f'valid_bleu_avg{n}']} | {cell[f'test_bleu_avg{n}']} | "
            f"{cell[f'test_bleu_avg{n}_beam5']} | {cell[f'test_bleu_avg{n}_beam5_1ref']} | "
            f"{cell['valid_bleu_ema']} | {cell['test_bleu_ema_beam5']} | "
            f"{cell['test_bleu_ema_beam5_1ref']} | {cell['newstest2021_bleu_beam5']} |"
        )


def update_row(results_file: Path, row: dict) -> None:
    rows = read_results(results_file)
    old = next((r for r in rows if r["variant"] == row["variant"]), None)
    if old is None:
        rows.append(row)
    else:
        rows[rows.index(old)] = {**old, **row}
    write_results(results_file, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-c", "--config", type=Path, default=common.ROOT / "configs/tatoeba-cpu.toml"
    )
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--only", nargs="*", help="variant names (default: all)")
    parser.add_argument("--out", type=Path, default=Path("runs/study"))
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides for every variant"
    )
    parser.add_argument("--table", action="store_true", help="print the results and stop")
    parser.add_argument(
        "--prepare-only", action="store_true", help="write the variants' data and stop"
    )
    parser.add_argument(
        "--rescore", action="store_true", help="score the trained variants again, no training"
    )
    parser.add_argument(
        "--news",
        type=lambda s: None if s == "none" else Path(s),
        default=NEWS,
        help="prefix of the newstest2021 files ('none': skip)",
    )
    args = parser.parse_args()
    results_file = args.out / "results.tsv"
    if args.table:
        print_table(read_results(results_file))
        return
    unknown = set(args.only or []) - set(VARIANTS)
    if unknown:
        sys.exit(f"unknown variants: {', '.join(sorted(unknown))} (known: {', '.join(VARIANTS)})")
    keep_freed_memory()
    done = {r["variant"] for r in read_results(results_file)}
    if args.rescore:
        names = [name for name in args.only or VARIANTS if name in done]
    else:
        names = [name for name in args.only or VARIANTS if args.only or name not in done]
    if args.prepare_only:
        for name in names:
            prepare_data(variant_config(args.config, name, args.minutes, args.out, args.set))
        return
    for name in names:
        while (args.out / HOLD).exists():  # someone needs the cores: wait, do not share them
            time.sleep(5)
        print(f"{time.strftime('%H:%M')} {name}: {describe(name, args.set)}", flush=True)
        config = variant_config(args.config, name, args.minutes, args.out, args.set)
        row = {"variant": name, "changes": describe(name, args.set)}
        if not args.rescore:
            row = run_variant(config, name, args.set)
        try:
            row.update(score_run(config, args.news))
        except UserError as e:  # a run from before train.keep_last, or cut short
            print(f"  not scored: {e}", flush=True)
        update_row(results_file, row)
        print("  " + ", ".join(f"{k} {v}" for k, v in row.items() if "bleu" in k), flush=True)


if __name__ == "__main__":
    main()
