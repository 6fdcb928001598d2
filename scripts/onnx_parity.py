"""A checkpoint exported with `translator export --format hf`, then exported to ONNX by
Hugging Face's `optimum-cli export onnx` and run by ONNX Runtime (`ORTModelForSeq2SeqLM`),
as a user of a Hub model would: how many sentences of the test split come out identical to
our engine's greedy translations. The figures in docs/deploy.md come from:

    python scripts/onnx_parity.py runs/tatoeba-cpu-post/checkpoints/average5.pt \\
        --data data/prepared/tatoeba-3k-ph3

optimum-onnx goes into a virtual environment of its own (--env, made once, reused after):
its newest release, 0.1.0, needs transformers < 4.58, and the project's development set
has transformers 5. That limits it to post-norm checkpoints (Marian): the Pegasus export
keeps its encoder's and decoder's embeddings apart, which transformers 4 cannot load (it
ties them to one matrix), so a pre-norm checkpoint is refused in one line.

Both read each sentence as `translate` gives it to the model (normalised, protected spans
as ⦅n⦆, restored after), greedy, with the levers transformers lacks off (as
scripts/hf_parity.py does).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hf_parity import our_engine, restored

from translator.data.layout import read_references
from translator.data.normalization import normalize_en
from translator.deploy.hf import export_hf
from translator.model.rundir import checkpoint_in

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="A post-norm checkpoint, or its run.")
    parser.add_argument("--data", type=Path, required=True, help="A prepared directory.")
    parser.add_argument("--split", default="test")
    parser.add_argument("--env", type=Path, default=Path("runs/optimum-env"))
    args = parser.parse_args(argv)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
