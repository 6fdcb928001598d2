"""A checkpoint in each form it leaves the project in, translated against the checkpoint
itself on a prepared split: `translator release` in each dtype, `translator export --format
hf` through transformers and CTranslate2's converter, and that export through ONNX Runtime:
one form a call. The figures in docs/deploy.md come from:

    python scripts/export_parity.py release runs/tatoeba-cpu/checkpoints/average5.pt \\
        --data data/prepared/tatoeba-3k-ph3
    python scripts/export_parity.py hf runs/tatoeba-cpu/checkpoints/average5.pt \\
        --data data/prepared/tatoeba-3k-ph3
    python scripts/export_parity.py onnx runs/tatoeba-cpu-post/checkpoints/average5.pt \\
        --data data/prepared/tatoeba-3k-ph3

**release**: the file sizes of the run's full checkpoint, the checkpoint itself and its
float32, float16 and bfloat16 releases, and for each release its greedy translations of
the split against the checkpoint's own (sentences identical, BLEU). Releases are written
to a temporary directory; nothing in the run changes.

**hf**: the checkpoint exported with `translator export --format hf`, the split translated
greedily by our engine and by transformers' `generate(num_beams=1)` in the same run: how
many sentences come out identical, and each engine's sentences per second (ours ÷ theirs),
with the same threads and batch size. Where ctranslate2 is installed, the export is also
converted by CTranslate2's own `ct2-transformers-converter`, as a user of a Hub model would,
and that model translates the split with the export's tokenizer: greedily, against our
engine, and with `--beam` against our own CTranslate2 export (`translator export`), with
the config's length penalty, which both give CTranslate2 alike. The export goes to a
temporary directory.

**onnx**: that export, then exported to ONNX by Hugging Face's `optimum-cli export onnx`
and run by ONNX Runtime (`ORTModelForSeq2SeqLM`), as a user of a Hub model would: how many
sentences of the split come out identical to our engine's greedy translations.
optimum-onnx goes into a virtual environment of its own (--env, made once, reused after):
its newest release, 0.1.0, needs transformers < 4.58, and the project's development set
has transformers 5. That limits it to post-norm checkpoints (Marian): the Pegasus export
keeps its encoder's and decoder's embeddings apart, which transformers 4 cannot load (it
ties them to one matrix), so a pre-norm checkpoint is refused in one line.

hf and onnx read the sentences as `translate` gives them to the model (normalised; the
decoding levers decode.recase and decode.final_mark and the guards decode.digit_guard and
decode.span_guard off, which transformers lacks; a model trained with data.placeholders is
given each sentence's protected spans as ⦅n⦆, and each ⦅n⦆ of the other engine's output is
restored as ours is) and may write the model's positions less one; transformers is not
told to stop early otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from translator.config import DecodeConfig
from translator.data import spans
from translator.data.layout import read_references
from translator.data.normalization import normalize_en
from translator.deploy.hf import export_hf, require_transformers
from translator.deploy.release import release
from translator.evaluation.scoring import score
from translator.inference.text import Translator
from translator.model.rundir import checkpoint_in

# ---- release -------------------------------------------------------------------------------------
DTYPES = ("float32", "float16", "bfloat16")


def megabytes(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def check_release(args) -> None:
    """Each dtype's release against the checkpoint: sizes, identical sentences, BLEU."""
    source = checkpoint_in(args.checkpoint)
    sources, references = read_references(args.data, args.split)
    greedy = DecodeConfig(beam=1, precision="fp32")  # the stored weights, as they decode
    baseline = Translator.from_checkpoint(source, "cpu", greedy, engine="torch").translate(sources)
    rows = []
    last = source.parent / "last.pt"
    if last.is_file() and last != source:
        rows.append(("the run's last.pt (training state)", megabytes(last), "", ""))
    bleu = score(baseline, references).bleu
    rows.append((f"{source.name} (the checkpoint)", megabytes(source), "", f"{bleu:.2f}"))
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in DTYPES:
            done = release(source, Path(tmp) / f"{dtype}.pt", dtype)
            released = Translator.from_checkpoint(done.path, "cpu", greedy, engine="torch")
            out = released.translate(sources)
            same = sum(a == b for a, b in zip(out, baseline, strict=True))
            bleu = score(out, references).bleu
            identical = f"{same:,} of {len(out):,}"
            rows.append((f"release, {dtype}", megabytes(done.path), identical, f"{bleu:.2f}"))
    print(f"greedy on {args.data}/{args.split} ({len(sources):,} sentences)\n")
    print("| file | size | greedy output identical to the checkpoint's | greedy BLEU |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


# ---- hf ------------------------------------------------------------------------------------------
def our_engine(source: Path, batch: int) -> Translator:
    """Our engine, greedy, with what transformers lacks switched off."""
    engine = Translator.from_checkpoint(source, "cpu", precision="fp32", engine="torch")
    return engine.with_decode(
        beam=1,
        batch_size=batch,
        recase=False,
        final_mark=False,
        digit_guard=False,
        span_guard=False,
        split=False,
        max_len_a=0.0,
        max_len_b=engine.engine.max_positions - 1,
    )


Masked = list[tuple[str, list[str]]]  # each sentence as our engine gives it, and its spans


def restored(text: str, found: list[str]) -> str:
    """Their output with its whitespace runs as ours and its ⦅n⦆ given back their spans."""
    return spans.unmask(" ".join(text.split()), found).text


def theirs(directory: Path, masked: Masked, batch: int) -> tuple[list[str], float]:
    """Batches of `batch` sentences in length order, as ours are, each padded; each given
    as our engine gives it to the model (its spans as ⦅n⦆, restored in the output)."""
    transformers = require_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(directory).eval()
    sentences = [text for text, _ in masked]
    lengths = [len(ids) for ids in tokenizer(sentences)["input_ids"]]
    order = sorted(range(len(sentences)), key=lengths.__getitem__)
    out = [""] * len(sentences)
    start = time.perf_counter()
    with torch.inference_mode():
        for at in range(0, len(order), batch):
            rows = order[at : at + batch]
            inputs = tokenizer([sentences[i] for i in rows], return_tensors="pt", padding=True)
            generated = model.generate(**inputs, num_beams=1, do_sample=False)
            texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
            for i, text in zip(rows, texts, strict=True):
                out[i] = restored(text, masked[i][1])
    return out, time.perf_counter() - start


def converted(directory: Path, out: Path) -> Path:
    """`ct2-transformers-converter --model DIR --output_dir OUT`, the command as a user runs
    it (the one installed beside this interpreter)."""
    command = Path(sys.executable).parent / "ct2-transformers-converter"
    done = subprocess.run(
        [str(command), "--model", str(directory), "--output_dir", str(out)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"error: ct2-transformers-converter failed: {done.stderr.strip()[-500:]}")
    return out


def through_converter(
    model_dir: Path,
    directory: Path,
    engine: Translator,
    masked: Masked,
    batch: int,
    beam: int,
) -> tuple[list[str], float]:
    """The converted model, given what the export's tokenizer makes of each sentence (as
    our engine gives it to the model), its output decoded by that tokenizer."""
    import ctranslate2

    transformers = require_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    translator = ctranslate2.Translator(str(model_dir), intra_threads=torch.get_num_threads())
    tokens = [tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"]) for text, _ in masked]
    start = time.perf_counter()
    results = translator.translate_batch(
        tokens,
        beam_size=beam,
        length_penalty=engine.decode_cfg.length_penalty,
        max_decoding_length=engine.engine.max_positions - 1,
        min_decoding_length=0,  # as ours: an empty translation may win (CTranslate2: 1)
        max_batch_size=batch,
    )
    seconds = time.perf_counter() - start
    out = []
    for result, (_, found) in zip(results, masked, strict=True):
        ids = tokenizer.convert_tokens_to_ids(result.hypotheses[0])
        out.append(restored(tokenizer.decode(ids, skip_special_tokens=True), found))
    return out, seconds


def our_ct2(source: Path, out: Path, like: Translator, beam: int) -> Translator:
    """Our own CTranslate2 export of `source` (float32), opened as `translate --engine
    ctranslate2 --model OUT` opens it (one translator of all threads), decoding as `like`
    but for `beam`."""
    from translator.deploy.export import export

    threads = torch.get_num_threads()
    ct2 = {"engine": "ctranslate2", "model_dir": str(export(source, out)), "workers": 1}
    decode = replace(like.decode_cfg, **ct2, threads=threads, beam=beam)
    return Translator.from_checkpoint(source, "cpu", decode)


def timed(engine: Translator, sentences: list[str]) -> tuple[list[str], float]:
    start = time.perf_counter()
    out = engine.translate(sentences)
    return out, time.perf_counter() - start


def check_hf(args) -> None:
    """The hf export through transformers (and CTranslate2's converter) against ours."""
    source = checkpoint_in(args.checkpoint)
    sentences = [normalize_en(s) for s in read_references(args.data, args.split)[0]]
    rows = []  # (engine, translations, seconds, the translations they are compared with)
    with tempfile.TemporaryDirectory() as tmp:
        directory, architecture, caveat = export_hf(source, Path(tmp) / "hf")
        engine = our_engine(source, args.batch)
        mine, my_seconds = timed(engine, sentences)
        rows.append(("translator (PyTorch), greedy", mine, my_seconds, None))
        masked = [engine.for_model(s) for s in sentences]
        their, their_seconds = theirs(directory, masked, args.batch)
        rows.append(("transformers generate, greedy", their, their_seconds, mine))
        try:
            import ctranslate2
        except ImportError:
            ctranslate2 = None
        if ctranslate2 is not None:
            model_dir = converted(directory, Path(tmp) / "converted")
            label = f"ct2-transformers-converter {ctranslate2.__version__}"
            got = through_converter(model_dir, directory, engine, masked, args.batch, 1)
            rows.append((f"{label}, greedy", *got, mine))
            beamed = our_ct2(source, Path(tmp) / "ours.ct2", engine, args.beam)
            reference, seconds = timed(beamed, sentences)
            rows.append((f"translator (CTranslate2), beam {args.beam}", reference, seconds, None))
            got = through_converter(model_dir, directory, engine, masked, args.batch, args.beam)
            rows.append((f"{label}, beam {args.beam}", *got, reference))
    n = len(sentences)
    print(
        f"{source} as {architecture}, {n:,} sentences of {args.data}/{args.split}, "
        f"batches of {args.batch}, {torch.get_num_threads()} threads, length penalty "
        f"{engine.decode_cfg.length_penalty}\n"
    )
    if caveat:
        print(f"note: {caveat}\n")
    print("| engine | sentences/s | identical to ours (the beam: to our CTranslate2) |")
    print("| --- | ---: | --- |")
    for name, out, seconds, against in rows:
        same = "ours" if against is None else f"{sum(map(str.__eq__, out, against)):,} of {n:,}"
        print(f"| {name} | {n / seconds:.1f} | {same} |")
    print(f"\nours ÷ transformers: {their_seconds / my_seconds:.2f}×")
    for name, out, _, against in rows:
        for a, b, s in zip(against or out, out, sentences, strict=True):
            if a != b:
                print(f"differs ({name}): {s!r}: ours {a!r}, theirs {b!r}")


# ---- onnx ----------------------------------------------------------------------------------------
PINS = [
    "torch==2.13.0",  # the Makefile's pin: the CPU wheel
    "transformers==4.57.6",  # the newest optimum-onnx 0.1.0 accepts
    "optimum-onnx[onnxruntime]==0.1.0",
    "sentencepiece",
    "protobuf",
]

# run by the optimum environment's interpreter: ONNX export, then greedy generation
PEER = """
import json, subprocess, sys
from pathlib import Path
hf, onnx, sentences, out = map(Path, sys.argv[1:5])
subprocess.run([str(Path(sys.executable).parent / "optimum-cli"), "export", "onnx",
                "--model", str(hf), "--task", "text2text-generation-with-past", str(onnx)],
               check=True, capture_output=True)
import torch, transformers
from optimum.onnxruntime import ORTModelForSeq2SeqLM
tokenizer = transformers.AutoTokenizer.from_pretrained(onnx)
model = ORTModelForSeq2SeqLM.from_pretrained(onnx)
texts, got = json.loads(sentences.read_text()), []
for at in range(0, len(texts), 32):
    batch = tokenizer(texts[at : at + 32], return_tensors="pt", padding=True)
    generated = model.generate(**batch, num_beams=1, do_sample=False)
    got += tokenizer.batch_decode(generated, skip_special_tokens=True)
from importlib.metadata import version
versions = {m: version(m) for m in ("transformers", "optimum-onnx", "onnxruntime")}
out.write_text(json.dumps({"translations": got, "versions": versions}, ensure_ascii=False))
"""


def optimum_env(path: Path) -> Path:
    """optimum-onnx's own environment at `path`, made once; its interpreter."""
    python = path / "bin" / "python"
    if (path / "bin" / "optimum-cli").is_file():
        return python
    print(f"installing {', '.join(PINS[1:3])} into {path} (once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    pip = [str(path / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *PINS], check=True)
    return python


def check_onnx(args) -> None:
    """The hf export through optimum's ONNX export and ONNX Runtime against ours."""
    source = checkpoint_in(args.checkpoint)
    sentences = [normalize_en(s) for s in read_references(args.data, args.split)[0]]
    engine = our_engine(source, 64)
    if engine.engine.model.model_cfg.norm != "post":
        sys.exit(
            "error: optimum-onnx needs transformers 4, which cannot load a pre-norm "
            "(Pegasus) export; pass a post-norm checkpoint"
        )
    python = optimum_env(args.env)
    mine = engine.translate(sentences)
    masked = [engine.for_model(s) for s in sentences]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        directory, architecture, _ = export_hf(source, work / "hf")
        (work / "sentences.json").write_text(json.dumps([t for t, _ in masked]))
        command = [str(python), "-c", PEER, str(directory), str(work / "onnx")]
        done = subprocess.run([*command, str(work / "sentences.json"), str(work / "out.json")])
        if done.returncode:
            sys.exit("error: the optimum environment failed (its output is above)")
        result = json.loads((work / "out.json").read_text())
    theirs = [
        restored(text, found)
        for text, (_, found) in zip(result["translations"], masked, strict=True)
    ]
    same = sum(a == b for a, b in zip(mine, theirs, strict=True))
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
    print(f"{source} as {architecture}, {len(sentences):,} sentences of {args.data}/{args.split}")
    print(f"optimum-cli export onnx → ORTModelForSeq2SeqLM, greedy ({versions})")
    print(f"identical to ours: {same:,} of {len(sentences):,}")
    for a, b, s in zip(mine, theirs, sentences, strict=True):
        if a != b:
            print(f"differs: {s!r}: ours {a!r}, ONNX Runtime {b!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    forms = parser.add_subparsers(dest="form", required=True, metavar="{release,hf,onnx}")
    every = argparse.ArgumentParser(add_help=False)
    every.add_argument("checkpoint", type=Path, help="A checkpoint, or a run directory.")
    every.add_argument("--data", type=Path, required=True, help="A prepared directory.")
    every.add_argument("--split", default="test")
    forms.add_parser("release", parents=[every], help="translator release, in each dtype")
    hf = forms.add_parser("hf", parents=[every], help="export --format hf: transformers, ct2")
    hf.add_argument("--batch", type=int, default=64, help="Sentences per batch, both.")
    hf.add_argument("--beam", type=int, default=5, help="Beam of the CTranslate2 pair.")
    onnx = forms.add_parser("onnx", parents=[every], help="the hf export through ONNX Runtime")
    onnx.add_argument("--env", type=Path, default=Path("runs/optimum-env"))
    args = parser.parse_args(argv)
    {"release": check_release, "hf": check_hf, "onnx": check_onnx}[args.form](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
