"""Speed, side by side in one run: our trainer and decoders against the naive reference in
scripts/reference/naive.py, on the same data with the same model size.

    python scripts/bench.py                         # quick: under 5 minutes on 2 CPU cores
    python scripts/bench.py --train-seconds 120     # longer training measurements
    python scripts/bench.py --device cuda -c configs/tatoeba-gpu.toml   # on a GPU (bf16)

1. training target tokens/s: our Trainer (token-budget batches) vs the reference trainer
   (32-sentence batches), each after a short warm-up; model FLOPs/s and MFU against the
   measured matrix-multiply peak (fp32 2048³ on CPU, bf16 8192³ on CUDA).
2. decoding the same sentences (valid + test splits, 1,500 by default): the reference's
   full re-decode greedy vs our cached greedy (outputs must be identical) vs our beam 5.

The reference trains first, in a default process; then the allocator setting the translator
CLI applies (translator/runtime.py) is switched on for our training and for all decoding.
The decoding model is --checkpoint, else the config's run best.pt if there is one, else
the model our trainer trained in step 1 (much less trained: outputs are longer).
Ends with one line: ratios: train=… greedy=… beam5=… mfu=…
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import bench_engines  # noqa: E402
from reference import naive  # noqa: E402

from translator import config as config_module  # noqa: E402
from translator.corpus.pipeline import prepare  # noqa: E402
from translator.data.batching import (  # noqa: E402
    encode_pairs,  # noqa: E402
    pad,
    padding_mask,
)
from translator.data.layout import read_split, tokenizer_file  # noqa: E402
from translator.data.tokenizer import BOS, EOS, PAD  # noqa: E402
from translator.inference.torch_engine import Translator, for_decoding  # noqa: E402
from translator.model.flops import count_parameters, forward_flops  # noqa: E402
from translator.runtime import keep_freed_memory, pick_device  # noqa: E402
from translator.training.trainer import Trainer  # noqa: E402


def matmul_flops(device: torch.device) -> tuple[float, str]:
    """FLOP/s of one large matrix multiply: the machine's practical ceiling."""
    n, dtype = (2048, torch.float32) if device.type == "cpu" else (8192, torch.bfloat16)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(2):
        a @ b
    runs, start = 0, time.perf_counter()
    while runs < 5 or time.perf_counter() - start < 2:
        a @ b
        runs += 1
        if device.type == "cuda":
            torch.cuda.synchronize()
    return 2 * n**3 * runs / (time.perf_counter() - start), f"{str(dtype)[6:]} {n}³ matmul"


def training_flops_per_token(trainer: Trainer) -> float:
    """Average model FLOPs (forward + backward ≈ 3× forward) per target token, over the
    real (unpadded) lengths of every training pair."""
    cfg, vocab = trainer.config.model, trainer.tgt_tok.get_piece_size()
    flops = tokens = 0
    for batch in trainer.data.train:
        src_lens = batch.src_mask[:, 0, 0].sum(dim=1).tolist()
        tgt_lens = (batch.tgt_out != PAD).sum(dim=1).tolist()
        for s, t in zip(src_lens, tgt_lens, strict=True):
            flops += 3 * forward_flops(cfg, s, t, vocab)
            tokens += t
    return flops / tokens


def bench_ours(trainer: Trainer, seconds: float, warmup: float) -> float:
    """Target tokens/s of the Trainer's own updates (Trainer.fit's inner loop, without
    logging, checkpoints or validation), epoch after epoch."""

    def run(duration: float) -> tuple[int, float]:
        end, tokens, spent = time.perf_counter() + duration, 0, 0.0
        while True:
            plan, order = trainer.start_epoch()
            for group in trainer.update_groups(order):
                state = trainer.state
                before = state.epoch_tokens, state.epoch_seconds
                trainer.update(plan, group)
                tokens += state.epoch_tokens - before[0]
                spent += state.epoch_seconds - before[1]
                if time.perf_counter() > end:
                    return tokens, spent
            trainer.state.start_next_epoch()

    run(warmup)
    tokens, spent = run(seconds)
    return tokens / spent


def bench_reference(config, data_dir: Path, src_tok, tgt_tok, seconds, warmup, device) -> float:
    torch.manual_seed(config.train.seed)
    m = config.model
    src, tgt, _ = encode_pairs(*read_split(data_dir, "train"), src_tok, tgt_tok, m.max_positions)
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
    batches = naive.make_batches([s.tolist() for s in src], [t.tolist() for t in tgt])
    naive.train_for(model, batches, warmup, device=device)
    tokens, spent, _ = naive.train_for(model, batches, seconds, device=device)
    return tokens / spent


def compare_outputs(translator, sources, ours, reference, tie=1e-4) -> int:
    """Our greedy output must equal the reference's. A sentence may differ only where, at
    the first differing token, the two choices' logits tie (|gap| < `tie`: different batch
    shapes round differently); returns how many such ties. Anything else stops the run."""
    model, ties = translator.model, 0
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

    config = config_module.load(args.config, values={"train.device": args.device})
    device = pick_device(config.train.device)
    data_dir = Path(config.data.dir)
    if not tokenizer_file(data_dir, "zh").is_file():
        print(f"preparing {', '.join(config.data.inputs)} into {data_dir} ...", flush=True)
        prepare(config.data)

    peak, peak_name = matmul_flops(device)
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

    flops_per_token = training_flops_per_token(trainer)
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
    ours = bench_ours(trainer, args.train_seconds, args.warmup_seconds)
    rows.append(("ours", f"token budget {config.train.max_tokens}", ours))
    base = rows[0][2]
    print(f"training, {args.train_seconds:g} s each     tgt tok/s   GFLOP/s    MFU   ratio")
    for name, batching, rate in rows:
        gflops = rate * flops_per_token / 1e9
        print(
            f"  {name:9s} {batching:20s} {rate:8.0f}  {gflops:8.1f}  {gflops * 1e9 / peak:5.0%}"
            f"  {rate / base:6.2f}"
        )
    mfu = ours * flops_per_token / peak

    greedy = replace(config.decode, beam=1)  # whatever decode.beam says: greedy is greedy
    if args.checkpoint or (Path(config.train.run_dir) / "checkpoints/best.pt").is_file():
        path = args.checkpoint or Path(config.train.run_dir) / "checkpoints/best.pt"
        translator = Translator.from_checkpoint(path, device, greedy)
        origin = str(path)
    else:
        model = for_decoding(trainer.model, greedy)
        translator = Translator(model, trainer.src_tok, trainer.tgt_tok, greedy)
        origin = (
            f"the model trained above ({args.warmup_seconds + args.train_seconds:g} s;"
            " barely trained, so not representative: train the config first)"
        )
    valid, test = read_split(data_dir, "valid")[0], read_split(data_dir, "test")[0]
    texts = (test + valid)[: args.sentences]
    sources = translator.encode(texts)
    limits = translator.limits([len(s) for s in sources]).tolist()
    model = translator.model.eval()
    n = len(sources)
    print(f"\ndecoding {n:,} sentences with {origin}")

    reference, ref_time = timed(lambda: naive.greedy_redecode(model, sources, limits))
    cached, greedy_time = timed(lambda: translator.search(sources))
    ties = compare_outputs(translator, sources, cached, reference)
    translator.decode.beam = 5
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
        found = bench_engines.compare(
            translator, texts, sources, data_dir, threads, args.repeats, compare_outputs
        )
        bench_engines.print_rows(found, n)
        engines = " " + bench_engines.summary(found)
    train_ratio = ours / rows[0][2] if not args.skip_reference_training else float("nan")
    print(
        f"\nratios: train={train_ratio:.2f} greedy={ref_time / greedy_time:.2f} "
        f"beam5={ref_time / beam_time:.2f} mfu={mfu:.2f}{engines}"
    )


if __name__ == "__main__":
    main()
