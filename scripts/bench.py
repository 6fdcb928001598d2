"""Speed, side by side in one run: our trainer and decoders against the naive reference in
scripts/reference/naive.py, on the same data with the same model size.

    python scripts/bench.py                         # quick: under 5 minutes on 2 CPU cores
    python scripts/bench.py --train-seconds 120     # longer training measurements
    python scripts/bench.py --device cuda -c configs/tatoeba-gpu.toml   # on a GPU (bf16)

1. training target tokens/s: our Trainer (token-budget batches) in fp32 and in bf16
   (train.precision) vs the reference trainer (32-sentence batches, fp32), each after a
   short warm-up; model FLOPs/s and MFU against the measured matrix-multiply peak (fp32
   2048³ on CPU, bf16 8192³ on CUDA). The train= ratio is ours in the config's precision
   (auto: bf16 on CUDA and on CPUs with bf16 instructions) over the reference. On a CPU
   without bf16 matrix instructions bf16 is not measured (one line says so; its ratio nan).
2. decoding the same sentences (valid + test splits, 1,500 by default): the reference's
   full re-decode greedy vs our cached greedy (outputs must be identical) vs our beam 5.
3. the decoding engines (when CTranslate2 is installed): our PyTorch decoder against
   CTranslate2 float32 and int8 (the same model exported with `translator export`), on the
   same sentences with the same search and length limits, CTranslate2 run both with all
   intra-op threads in one translator and as that many workers of one thread. Each row:
   sentences/s, target tokens/s, test BLEU (each distinct test sentence once, against all
   its references) and the speed ratio to our decoder with the same search. CTranslate2
   float32 greedy output must equal ours but at exact logit ties (checked like the
   reference's).

The reference trains first, in a default process; then the allocator setting the translator
CLI applies (translator/runtime.py) is switched on for our training and for all decoding.
The decoding model is --checkpoint, else the config's run's model (train.final) if there is
one, else the model our trainer trained in step 1 (much less trained: outputs are longer),
saved to a temporary checkpoint. Every decoder is opened as users open one
(`Translator.from_checkpoint`); the reference, the logit check and the MKL row reach below
it to the same model's weights (`translator.engine.model`).
Ends with one line: ratios: train=… train_bf16_vs_fp32=… greedy=… beam5=… mfu=…
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from common import ROOT, load_config, timed_runs, with_values
from reference import naive
from step_measures import bf16_measured, flops_per_token, matmul_peak, tokens_per_s

from translator.config import Config
from translator.corpus.preparer import prepare
from translator.data.batching import pad, padding_mask
from translator.data.layout import read_references, read_split, tokenizer_file
from translator.data.tokenizer import BOS, EOS
from translator.deploy.export import export
from translator.errors import UserError
from translator.evaluation.scoring import score
from translator.inference import torch_engine as onednn
from translator.inference.engine import output_limits
from translator.inference.text import Translator
from translator.inference.torch_engine import for_decoding
from translator.model import checkpoint as checkpoint_module
from translator.model.flops import count_parameters
from translator.model.rundir import RunDir, checkpoint_in
from translator.runtime import keep_freed_memory, pick_device
from translator.training.trainer import Trainer

REPEAT_SECONDS = 120.0  # a decoding row's repeats stop once they have taken this long


def bench_reference(config, data_dir: Path, src_tok, tgt_tok, seconds, warmup, device) -> float:
    torch.manual_seed(config.train.seed)
    m = config.model
    english, chinese = read_split(data_dir, "train")
    src, tgt = naive.encode_pairs(english, chinese, src_tok, tgt_tok, m.max_positions)
    model = naive.EncoderDecoder(
        src_tok.get_piece_size(),
        tgt_tok.get_piece_size(),
        m.encoder_layers,
        m.decoder_layers,
        m.d_model,
        m.ff_dim,
        m.heads,
        m.dropout,
    )
    batches = naive.make_batches(src, tgt)
    naive.train_for(model, batches, warmup, device=device)
    tokens, spent, _ = naive.train_for(model, batches, seconds, device=device)
    return tokens / spent


def compare_outputs(translator, sources, ours, reference, tie=1e-4) -> int:
    """Our greedy output must equal the reference's. A sentence may differ only where, at
    the first differing token, the two choices' logits tie (|gap| < `tie`: different batch
    shapes round differently); returns how many such ties. Anything else stops the run."""
    model, ties = translator.engine.model, 0
    for i, (a, b) in enumerate(zip(ours, reference, strict=True)):
        if a == b:
            continue
        step = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
        choices = [seq[step] if step < len(seq) else EOS for seq in (a, b)]
        device = next(model.parameters()).device
        src = pad([sources[i]]).to(device)
        mask = padding_mask(src)
        with torch.inference_mode():
            state = model.start_decoding(model.encode(src, mask), mask)
            logits, _ = model.decode(torch.tensor([[BOS] + a[:step]], device=device), state)
        gap = float(logits[0, -1, choices[0]] - logits[0, -1, choices[1]])
        if abs(gap) >= tie:
            sys.exit(
                f"sentence {i}: our greedy output differs from the reference at token "
                f"{step} and it is no tie (logit gap {gap:.4g})"
            )
        ties += 1
    return ties


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


# ---- decoding engines ----------------------------------------------------------------
@dataclass
class Row:
    engine: str
    search: str
    seconds: float
    tokens: int
    bleu: float
    ratio: float = 1.0  # speed ÷ our decoder's, same search
    note: str = ""
    outputs: list | None = None
    tag: str = ""  # its name on the closing line, e.g. ct2_int8_2x1 (CTranslate2 rows)


def timed_search(translator, sources, repeats: int, seconds: float = REPEAT_SECONDS):
    """The outputs for `sources` and the median time of `repeats` searches (fewer once
    `seconds` have passed)."""
    out, times = timed_runs(lambda: translator.search(sources), repeats, seconds)
    return out, statistics.median(times)


def test_split_bleu(translator, outputs, texts, data_dir) -> float:
    """BLEU of `outputs` (ids, one per text) for the distinct test sentences among `texts`,
    each scored once against all its references."""
    english, references = read_references(data_dir, "test")
    first: dict[str, int] = {}
    for i, text in enumerate(texts):
        first.setdefault(text, i)
    kept = [(first[e], refs) for e, refs in zip(english, references, strict=True) if e in first]
    hyps = [translator.detokenize(outputs[i]) for i, _ in kept]
    return score(hyps, [refs for _, refs in kept]).bleu


CT2_PRECISION = {"float32": "fp32", "int8": "int8"}  # decode.precision of each CPU export


def variants(device: str, threads: int) -> list[tuple[str, int, int, int]]:
    """(quantization, translators, threads each, sentences a batch) to run CTranslate2
    with: on the CPU float32 and int8, as one translator of all threads (batches of 256,
    as ours) and as one translator per thread (batches of 32, its fastest there: with 256
    the six batches split unevenly between the translators); on CUDA float32, float16 and
    int8_float16, one translator."""
    if device == "cuda":
        return [(q, 1, 1, 256) for q in ("float32", "float16", "int8_float16")]
    ways = ((1, threads, 256), (threads, 1, 32))
    return [(q, w, t, b) for q in ("float32", "int8") for w, t, b in ways]


def our_rows(translator, texts, sources, data_dir, repeats) -> list[Row]:
    """Our decoder, greedy and beam 5; on CUDA also under bf16 autocast; on a CPU where
    oneDNN serves our linear layers (decode.onednn, the default) also with MKL's."""
    rows = []
    cuda = translator.engine.device.type == "cuda"
    if cuda:
        kinds = ("float32", "bf16")
    else:
        kinds = ("float32", "float32 MKL") if onednn.available() else ("float32",)
    for kind in kinds:
        autocast = torch.autocast("cuda", torch.bfloat16, enabled=kind == "bf16")
        onednn.use_onednn(translator.engine.model, kind != "float32 MKL")
        for beam in (1, 5):
            mine = translator.with_decode(beam=beam)
            with autocast:
                out, seconds = timed_search(mine, sources, repeats)
            row = Row(f"ours PyTorch {kind}", f"beam {beam}", seconds, _tokens(out), 0.0)
            row.bleu, row.outputs = test_split_bleu(mine, out, texts, data_dir), out
            base = next((r for r in rows if r.search == row.search), row)  # float32's
            row.ratio = base.seconds / seconds
            if kind == "float32 MKL":
                row.note, row.tag = _agreement(out, base.outputs), "ours_mkl"
            rows.append(row)
    for_decoding(translator.engine.model, translator.decode_cfg)
    return rows


def compare_engines(
    translator: Translator, texts, sources, data_dir, threads: int, repeats: int, check_greedy
) -> list[Row]:
    """Rows for ours and CTranslate2 (`variants`) × (greedy, beam 5); ratios to our
    float32 decoder with the same search."""
    rows = our_rows(translator, texts, sources, data_dir, repeats)
    try:
        ct2_rows(translator, texts, sources, data_dir, threads, repeats, check_greedy, rows)
    except UserError as exc:  # e.g. CTranslate2's CUDA libraries are missing
        print(f"  (CTranslate2 rows skipped from here: {exc})")
    return rows


def ct2_rows(translator, texts, sources, data_dir, threads, repeats, check_greedy, rows):
    """Append CTranslate2's rows to `rows` (ours first): our model exported, each export
    opened as `translate --engine ctranslate2 --model DIR` opens it."""
    device = translator.engine.device.type
    ours = {int(r.search.split()[1]): r for r in rows[:2]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        saved(
            path,
            translator.engine.model,
            translator.src_tok,
            translator.tgt_tok,
            translator.decode_cfg,
        )
        for quantization, workers, per, batch in variants(device, threads):
            model_dir = Path(tmp) / quantization
            if not model_dir.exists():
                export(path, model_dir, quantization)
            for beam in (1, 5):
                decode = replace(
                    translator.decode_cfg,
                    beam=beam,
                    batch_size=batch,
                    precision=CT2_PRECISION.get(quantization, "auto"),  # the export's own
                    engine="ctranslate2",
                    model_dir=str(model_dir),
                    threads=per,
                    workers=workers,
                )
                theirs = Translator.from_checkpoint(path, device, decode)
                out, seconds = timed_search(theirs, sources, repeats)
                note = _agreement(out, ours[beam].outputs)
                if quantization == "float32" and beam == 1:
                    ties = check_greedy(translator, sources, ours[1].outputs, out)
                    note = "identical output" + (f" but for {ties} tie(s)" if ties else "")
                engine = f"CT2 {quantization} {workers}×{per} thr, {batch}"
                bleu = test_split_bleu(theirs, out, texts, data_dir)
                ratio = ours[beam].seconds / seconds
                row = Row(engine, f"beam {beam}", seconds, _tokens(out), bleu, ratio, note)
                row.tag = f"ct2_{quantization}_{workers}x{per}"
                rows.append(row)


def print_rows(rows: list[Row], n: int) -> None:
    print(f"  {'engine':30s} {'search':7s} {'sent/s':>7s} {'tok/s':>7s} {'BLEU':>6s} {'ratio':>6s}")
    for r in rows:
        print(
            f"  {r.engine:30s} {r.search:7s} {n / r.seconds:7.1f} {r.tokens / r.seconds:7.0f} "
            f"{r.bleu:6.2f} {r.ratio:6.2f}  {r.note}"
        )


def _tokens(outputs) -> int:
    return sum(len(o) for o in outputs)


def _agreement(outputs, ours) -> str:
    same = sum(a == b for a, b in zip(outputs, ours, strict=True))
    return f"{same}/{len(ours)} as ours"


def saved(path: Path, model, src_tok, tgt_tok, decode_cfg) -> None:
    """An in-memory model saved at `path` as a checkpoint, what `translator export` and
    `Translator.from_checkpoint` read: its weights and tokenizers, and `decode_cfg`."""
    config = Config(model=model.model_cfg, decode=decode_cfg)
    tokenizers = {"src": src_tok.serialized_model_proto(), "tgt": tgt_tok.serialized_model_proto()}
    weights = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    payload = {"config": config.to_dict(), "tokenizer_models": tokenizers, "model": weights}
    checkpoint_module.save(payload, path)


def summary(rows: list[Row]) -> str:
    """The engine ratios for the closing line: each speed ÷ our default decoder's, e.g.
    ct2_int8_2x1_beam1=4.82 or ours_mkl_beam5=0.65."""
    return " ".join(f"{r.tag}_{r.search.replace(' ', '')}={r.ratio:.2f}" for r in rows if r.tag)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", default=str(ROOT / "configs/tatoeba-cpu.toml"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--train-seconds", type=float, default=40.0)
    parser.add_argument("--warmup-seconds", type=float, default=5.0)
    parser.add_argument("--sentences", type=int, default=1500)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per decoding engine row (median)"
    )
    parser.add_argument(
        "--skip-reference-training",
        action="store_true",
        help="e.g. on a GPU, where the fp32 reference is not the question",
    )
    args = parser.parse_args()

    config = load_config(args.config, values={"train.device": args.device})
    device = pick_device(config.train.device)
    data_dir = Path(config.data.dir)
    if not tokenizer_file(data_dir, "zh").is_file():
        names = ", ".join(c.name for c in config.data.inputs)
        print(f"preparing {names} into {data_dir} ...", flush=True)
        prepare(config.data)

    peak, peak_name = matmul_peak(device)
    trainer = Trainer(config, progress=False)
    m = config.model
    print(f"device: {device} ({torch.get_num_threads()} threads), torch {torch.__version__}")
    print(f"data: {data_dir} ({trainer.data.train_pairs:,} training pairs)")
    print(
        f"model: {m.encoder_layers}+{m.decoder_layers} layers, d_model {m.d_model}, "
        f"{m.heads} heads, ff {m.ff_dim}, vocab {trainer.src_tok.get_piece_size()}/"
        f"{trainer.tgt_tok.get_piece_size()}, {count_parameters(trainer.model):,} parameters"
    )
    print(f"peak: {peak_name} at {peak / 1e9:.1f} GFLOP/s\n")

    per_token = flops_per_token(trainer)
    rows = []
    if not args.skip_reference_training:  # first: it runs with the default allocator
        ref = bench_reference(
            config,
            data_dir,
            trainer.src_tok,
            trainer.tgt_tok,
            args.train_seconds,
            args.warmup_seconds,
            device,
        )
        rows.append(("reference", "32 sentences/batch", ref))
    keep_freed_memory()  # what the translator CLI does; from here on for every measurement
    speed = {}  # ours in each precision, the config's own (train.precision auto) last
    other = "fp32" if trainer.precision == "bf16" else "bf16"
    unmeasured = bf16_measured(device) if "bf16" in (other, trainer.precision) else None
    for precision in (other, trainer.precision):
        if precision == "bf16" and unmeasured:
            print(unmeasured)
            continue
        run = trainer
        if precision != trainer.precision:
            run = Trainer(with_values(config, train__precision=precision), progress=False)
        speed[precision] = tokens_per_s(run, args.train_seconds, args.warmup_seconds)
        rows.append(("ours", f"{config.train.max_tokens} tokens, {precision}", speed[precision]))
    ours = speed[trainer.precision]
    base = rows[0][2]
    print(f"training, {args.train_seconds:g} s each     tgt tok/s   GFLOP/s    MFU   ratio")
    for name, batching, rate in rows:
        gflops = rate * per_token / 1e9
        print(
            f"  {name:9s} {batching:20s} {rate:8.0f}  {gflops:8.1f}  {gflops * 1e9 / peak:5.0%}"
            f"  {rate / base:6.2f}"
        )
    if other in speed:
        print(
            f"  (MFU against the {peak_name}; ours in {trainer.precision}, the config's "
            f"precision here, is {ours / speed[other]:.2f}x ours in {other})"
        )
    mfu = ours * per_token / peak

    # whatever decode.beam says, greedy is greedy; fp32, as the reference computes
    greedy = replace(config.decode, beam=1, precision="fp32", engine="torch")
    final = RunDir(config.train.run_dir).final.path
    if args.checkpoint or final.is_file():
        path = checkpoint_in(args.checkpoint) if args.checkpoint else final
        translator = Translator.from_checkpoint(path, device, greedy)
        origin = str(path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model.pt"
            saved(path, trainer.model, trainer.src_tok, trainer.tgt_tok, greedy)
            translator = Translator.from_checkpoint(path, device, greedy)
        origin = (
            f"the model trained above ({args.warmup_seconds + args.train_seconds:g} s;"
            " barely trained, so not representative: train the config first)"
        )
    valid, test = read_split(data_dir, "valid")[0], read_split(data_dir, "test")[0]
    texts = (test + valid)[: args.sentences]
    sources = translator.encode(texts)
    lengths = [len(s) for s in sources]
    limits = output_limits(lengths, translator.decode_cfg, translator.engine.max_positions)
    model = translator.engine.model.eval()
    n = len(sources)
    print(f"\ndecoding {n:,} sentences with {origin}")

    reference, ref_time = timed(lambda: naive.greedy_redecode(model, sources, limits))
    cached, greedy_time = timed(lambda: translator.search(sources))
    ties = compare_outputs(translator, sources, cached, reference)
    translator.decode_cfg.beam = 5
    beam, beam_time = timed(lambda: translator.search(sources))
    tokens = sum(len(o) for o in cached)
    print(f"  {'':44s} sent/s   ratio")
    for label, seconds, note in (
        ("reference greedy (full re-decode, 32/batch)", ref_time, ""),
        (
            f"ours greedy (KV cache, {config.decode.batch_size}/batch)",
            greedy_time,
            "identical output" + (f" but for {ties} exact tie(s)" if ties else ""),
        ),
        ("ours beam 5", beam_time, ""),
    ):
        print(f"  {label:44s} {n / seconds:6.1f}  {ref_time / seconds:6.2f}   {note}")
    print(
        f"  (greedy wrote {tokens / n:.1f} tokens per sentence; {greedy_time:.2f} s greedy, "
        f"{beam_time:.2f} s beam 5, {ref_time:.2f} s reference)"
    )
    engines = ""
    if importlib.util.find_spec("ctranslate2") is None:
        print("\n(CTranslate2 rows skipped: it is not installed)")
    else:
        threads = torch.get_num_threads()
        print(f"\ndecoding engines, same sentences, {threads} threads, medians of {args.repeats}")
        found = compare_engines(
            translator, texts, sources, data_dir, threads, args.repeats, compare_outputs
        )
        print_rows(found, n)
        engines = " " + summary(found)
    train_ratio = ours / rows[0][2] if not args.skip_reference_training else float("nan")
    bf16_vs_fp32 = speed["bf16"] / speed["fp32"] if "bf16" in speed else float("nan")
    print(
        f"\nratios: train={train_ratio:.2f} train_bf16_vs_fp32={bf16_vs_fp32:.2f} "
        f"greedy={ref_time / greedy_time:.2f} beam5={ref_time / beam_time:.2f} "
        f"mfu={mfu:.2f}{engines}"
    )


if __name__ == "__main__":
    main()
