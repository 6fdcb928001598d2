"""What a glossary costs: loading a large one, and decoding with one, side by side with
decoding without (docs/performance.md#glossaries).

    python scripts/bench_glossary.py -c configs/tatoeba-cpu.toml \\
        --checkpoint runs/tatoeba-cpu/checkpoints/average5.pt \\
        --terms terms.test.tsv --terms disagree/glossary.tsv

1. Load: a generated glossary of --entries (1,000,000) entries, loaded in a fresh process:
   seconds (best of --repeats) and the process's peak resident memory, beside an empty
   process's (the glossary's own share is the difference).
2. Decode: the whole `translate` of the config's test split, on each engine (ours, and
   CTranslate2 where the checkpoint's export lies beside it) in the config's precision,
   in a fresh process for each engine and beam (scripts/common.py `alone`), the ways
   taken in turn for --repeats (9) rounds (median): without a glossary; with a
   10,000-entry one that matches nothing (what matching costs; its outputs must equal
   those without, and are compared); with a 10,000-entry one holding the entries of the
   --terms glossaries (the first's where two give one English; what keeping its terms
   costs: the translations that miss one are edited, inference/terms.py). Each at the
   config's beam and greedy. Ratios are sentences/s with the glossary ÷ without.
3. The whole `translate`: `translator translate -i TEST -o OUT` as a user runs it, a
   fresh process each time (start-up, loading the model and the glossary, translating,
   writing), without a glossary and with the 10,000-entry one holding the --terms
   entries taken in turn for --repeats rounds (median), on each engine and beam.
The last line lists the ratios as `ratios: load_s=… torch_absent_beam5=…
torch_terms_beam5=… … whole_torch_beam5=… …`.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import alone, config_home, load_config, translator_command

from translator.data.glossary import Glossary


def generated(path: Path, entries: int, extra: dict[str, str] | None = None) -> Path:
    """A glossary file of `entries` made-up one- and two-word terms no sentence holds
    (zq… words), and `extra`'s entries."""
    lines = [f"zq{i:07d}{' term' if i % 3 == 0 else ''}\t术语{i}\n" for i in range(entries)]
    lines += [f"{e}\t{c}\n" for e, c in (extra or {}).items()]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_once(path: str) -> tuple[float, float, int]:
    """Seconds to load `path`, this process's peak memory after, and the entries."""
    start = time.perf_counter()
    glossary = Glossary.load(path)
    return time.perf_counter() - start, peak_mb(), len(glossary)


def empty_process() -> float:
    return peak_mb()


def decode(config_file: str, overrides: list[str], checkpoint: str, engine_name: str,
           glossaries: list[str | None], beam: int, repeats: int):  # fmt: skip
    """The engine's line, and for each of `glossaries` (None: without one), the median
    seconds to translate the test split and the translations: in one process, the ways
    taken in turn, `repeats` rounds, so that what varies from one process to the next (up
    to a fifth of the speed here) is the same for all of them."""
    import torch

    from translator.data.layout import read_references
    from translator.inference.ct2_engine import beside
    from translator.inference.text import Translator

    config = load_config(config_file, overrides)
    sources, _ = read_references(config.data.dir, "test")
    exported = str(beside(Path(checkpoint))) if engine_name == "ctranslate2" else ""
    decode = dataclasses.replace(config.decode, model_dir=exported)
    engine = Translator.from_checkpoint(
        checkpoint, torch.device("cpu"), decode, engine=engine_name
    ).with_decode(beam=beam)
    loaded = [Glossary.load(path) if path else None for path in glossaries]
    for glossary in loaded:
        engine.translate(sources[:64], split=False, glossary=glossary)  # warmed up
    times: list[list[float]] = [[] for _ in loaded]
    outputs: list[list[str]] = [[] for _ in loaded]
    for _ in range(repeats):
        for i, glossary in enumerate(loaded):
            start = time.perf_counter()
            outputs[i] = engine.translate(sources, split=False, glossary=glossary)
            times[i].append(time.perf_counter() - start)
    medians = [(statistics.median(t), out) for t, out in zip(times, outputs, strict=True)]
    return engine.engine_line, medians


def engines(checkpoint: Path) -> list[str]:
    """Ours, and CTranslate2 where the checkpoint's export lies beside it."""
    import importlib.util

    from translator.inference.ct2_engine import beside

    exported = beside(checkpoint).is_dir() and importlib.util.find_spec("ctranslate2")
    return ["torch", "ctranslate2"] if exported else ["torch"]


def whole(args, engine_name: str, beam: int, glossary: Path, tmp: Path) -> tuple[float, float]:
    """Median seconds of the whole `translate` of the test split (a fresh process each
    time), without the glossary and with it, taken in turn for --repeats rounds."""
    from translator.data.layout import read_references
    from translator.inference.ct2_engine import beside

    config = load_config(args.config, args.set)
    sources, _ = read_references(config.data.dir, "test")
    given = tmp / "test.en"
    given.write_text("".join(f"{s}\n" for s in sources), encoding="utf-8")
    checkpoint = Path(args.checkpoint).resolve()
    command = translator_command(
        "translate", "-c", str(Path(args.config).resolve()), "--checkpoint", str(checkpoint),
        "--engine", engine_name, "--beam", str(beam), "-i", str(given), "-o", str(tmp / "out"),
        *(["--model", str(beside(checkpoint))] if engine_name == "ctranslate2" else []),
        *[f"--set={value}" for value in args.set],
    )  # fmt: skip
    ways = [command, [*command, "--glossary", str(glossary)]]
    times: list[list[float]] = [[], []]
    for _ in range(args.repeats):
        for way, took in zip(ways, times, strict=True):
            start = time.perf_counter()
            subprocess.run(way, cwd=config_home(args.config), check=True, capture_output=True)
            took.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def matched_share(config, entries: dict[str, str]) -> tuple[int, int]:
    """How many of the test split's sentences the entries match, of how many."""
    from translator.data.layout import read_references
    from translator.data.spans import ranges

    sources, _ = read_references(config.data.dir, "test")
    glossary = Glossary(entries)
    return sum(1 for s in sources if glossary.find(s, ranges(s))), len(sources)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", required=True)
    parser.add_argument("--set", action="append", default=[], help="a config override")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument(
        "--terms", required=True, action="append",
        help="a terminology test's glossary (term_test.py; repeatable)",
    )  # fmt: skip
    parser.add_argument("--entries", type=int, default=1_000_000, help="of the load test")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    config = load_config(args.config, args.set)
    terms: dict[str, str] = {}
    for path in args.terms:
        terms = Glossary.load(path).entries | terms  # the first file's entry wins
    with tempfile.TemporaryDirectory() as tmp:
        big = generated(Path(tmp) / "big.tsv", args.entries)
        loads = [alone(load_once, str(big)) for _ in range(args.repeats)]
        base = alone(empty_process)
        seconds = min(s for s, _, _ in loads)
        print(f"load {loads[0][2]:,} entries: {seconds:.2f} s (best of {len(loads)}), "
              f"peak {max(m for _, m, _ in loads):.0f} MB against {base:.0f} MB empty")  # fmt: skip
        absent = generated(Path(tmp) / "absent.tsv", 10_000)
        with_terms = generated(Path(tmp) / "terms.tsv", 10_000 - len(terms), terms)
        ratios = {"load_s": round(seconds, 2)}
        held, total = matched_share(config, terms)
        print(f"\nthe --terms entries ({len(terms):,}) match {held:,} of the {total:,} test "
              f"sentences ({held / total:.0%})")  # fmt: skip
        for name in engines(Path(args.checkpoint)):
            for beam in dict.fromkeys((config.decode.beam, 1)):
                ways = [None, str(absent), str(with_terms)]
                line, ((plain, before), *others) = alone(
                    decode, args.config, args.set, args.checkpoint, name, ways, beam, args.repeats
                )
                n = len(before)
                print(f"\n{line}")
                print(f"{'decoding the test split':44} {'beam':>4} {'sent/s':>7} {'ratio':>6}")
                print(f"{'no glossary':44} {beam:4} {n / plain:7.1f} {1:6.2f}")
                for way, (took, after) in zip(("absent", "terms"), others, strict=True):
                    if way == "absent":
                        same = sum(a == b for a, b in zip(before, after, strict=True))
                        print(f"  (outputs identical to no glossary's: {same} of {n})")
                    label = "10,000 entries, " + (
                        "none in the text" if way == "absent" else "the --terms entries"
                    )
                    print(f"{label:44} {beam:4} {n / took:7.1f} {plain / took:6.2f}")
                    ratios[f"{name}_{way}_beam{beam}"] = round(plain / took, 2)
        print(f"\n{'the whole translate (a fresh process)':40} {'beam':>4} {'none s':>7} "
              f"{'with s':>7} {'ratio':>6}")  # fmt: skip
        for name in engines(Path(args.checkpoint)):
            for beam in dict.fromkeys((config.decode.beam, 1)):
                plain, took = whole(args, name, beam, with_terms, Path(tmp))
                print(f"{name:40} {beam:4} {plain:7.2f} {took:7.2f} {plain / took:6.2f}")
                ratios[f"whole_{name}_beam{beam}"] = round(plain / took, 2)
    print("ratios: " + " ".join(f"{k}={v}" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
