"""The decoding engines side by side, for scripts/bench.py: our PyTorch decoder against
CTranslate2 float32 and int8 (the same model exported with `translator export`), on the
same sentences with the same search and length limits, CTranslate2 run both with all
intra-op threads in one translator and as that many workers of one thread. Each row:
sentences/s, target tokens/s, test BLEU (each distinct test sentence once, against all its
references) and the speed ratio to our decoder with the same search. CTranslate2 float32
greedy output must equal ours but at exact logit ties (checked like the reference's)."""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from translator.data.layout import read_references
from translator.deploy.export import export
from translator.errors import UserError
from translator.evaluation.scoring import score
from translator.inference import onednn
from translator.inference.torch_engine import Translator, for_decoding
from translator.model import checkpoint as checkpoint_module


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


def timed_search(translator, sources, repeats: int):
    """The outputs for `sources` and the median time of `repeats` searches."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = translator.search(sources)
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def test_bleu(translator, outputs, texts, data_dir) -> float:
    """BLEU of `outputs` (ids, one per text) for the distinct test sentences among `texts`,
    each scored once against all its references."""
    english, references = read_references(data_dir, "test")
    first: dict[str, int] = {}
    for i, text in enumerate(texts):
        first.setdefault(text, i)
    kept = [(first[e], refs) for e, refs in zip(english, references, strict=True) if e in first]
    hyps = [translator.detokenize(outputs[i]) for i, _ in kept]
    return score(hyps, [refs for _, refs in kept]).bleu


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
    cuda = translator.device.type == "cuda"
    if cuda:
        kinds = ("float32", "bf16")
    else:
        kinds = ("float32", "float32 MKL") if onednn.available() else ("float32",)
    for kind in kinds:
        autocast = torch.autocast("cuda", torch.bfloat16, enabled=kind == "bf16")
        onednn.use_onednn(translator.model, kind != "float32 MKL")
        for beam in (1, 5):
            mine = Translator(
                translator.model,
                translator.src_tok,
                translator.tgt_tok,
                replace(translator.decode, beam=beam),
            )
            with autocast:
                out, seconds = timed_search(mine, sources, repeats)
            row = Row(f"ours PyTorch {kind}", f"beam {beam}", seconds, _tokens(out), 0.0)
            row.bleu, row.outputs = test_bleu(mine, out, texts, data_dir), out
            base = next((r for r in rows if r.search == row.search), row)  # float32's
            row.ratio = base.seconds / seconds
            if kind == "float32 MKL":
                row.note, row.tag = _agreement(out, base.outputs), "ours_mkl"
            rows.append(row)
    for_decoding(translator.model, translator.decode)
    return rows


def compare(
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
    """Append CTranslate2's rows to `rows` (ours first)."""
    from translator.inference.ct2_engine import CTranslate2Translator

    device = translator.device.type
    ours = {int(r.search.split()[1]): r for r in rows[:2]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        checkpoint_module.save(_payload(translator), path)
        for quantization, workers, per, batch in variants(device, threads):
            model_dir = Path(tmp) / quantization
            if not model_dir.exists():
                export(path, model_dir, quantization)
            for beam in (1, 5):
                theirs = CTranslate2Translator.from_dir(
                    model_dir,
                    replace(translator.decode, beam=beam, batch_size=batch),
                    device=device,
                    threads=per,
                    workers=workers,
                )
                out, seconds = timed_search(theirs, sources, repeats)
                note = _agreement(out, ours[beam].outputs)
                if quantization == "float32" and beam == 1:
                    ties = check_greedy(translator, sources, ours[1].outputs, out)
                    note = "identical output" + (f" but for {ties} tie(s)" if ties else "")
                engine = f"CT2 {quantization} {workers}×{per} thr, {batch}"
                bleu = test_bleu(theirs, out, texts, data_dir)
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


def _payload(translator: Translator) -> dict:
    """What `translator export` reads from a checkpoint, for an in-memory model."""
    from translator.config import Config

    model = translator.model
    config = Config(model=model.cfg, decode=translator.decode)
    return {
        "config": config.to_dict(),
        "tokenizer_models": {
            "src": translator.src_tok.serialized_model_proto(),
            "tgt": translator.tgt_tok.serialized_model_proto(),
        },
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }


def summary(rows: list[Row]) -> str:
    """The engine ratios for the closing line: each speed ÷ our default decoder's, e.g.
    ct2_int8_2x1_beam1=4.82 or ours_mkl_beam5=0.65."""
    return " ".join(f"{r.tag}_{r.search.replace(' ', '')}={r.ratio:.2f}" for r in rows if r.tag)
