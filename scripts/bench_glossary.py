"""What a glossary costs: loading a large one, and decoding with one, side by side with
decoding without (docs/performance.md#glossaries).

    python scripts/bench_glossary.py -c configs/tatoeba-cpu.toml \\
        --checkpoint runs/tatoeba-cpu/checkpoints/average5.pt --terms terms.test.tsv

1. Load: a generated glossary of --entries (1,000,000) entries, loaded in a fresh process:
   seconds (best of --repeats) and the process's peak resident memory, beside an empty
   process's (the glossary's own share is the difference).
2. Decode: the config's test split, in a fresh process for each beam (scripts/common.py
   `alone`), the ways taken in turn for --repeats (9) rounds (median): without a glossary;
   with a 10,000-entry one that matches nothing (what matching costs; its outputs must
   equal those without, and are compared); with a 10,000-entry one holding the --terms
   glossary's entries (what keeping its terms costs: the sentences whose translation
   misses one are searched again with constraints). Each at the config's beam and
   greedy. Ratios are sentences/s with the glossary ÷ without; the last line lists them
   as `ratios: load_s=… absent=… terms=… absent_greedy=… terms_greedy=…`.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import alone, load_config

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


def decode(config_file: str, overrides: list[str], checkpoint: str, glossaries: list[str | None],
           beam: int, repeats: int) -> list[tuple[float, list[str]]]:  # fmt: skip
    """For each of `glossaries` (None: without one), the median seconds to translate the
    test split and the translations: in one process, the ways taken in turn, `repeats`
    rounds, so that what varies from one process to the next (up to a fifth of the speed
    here) is the same for all of them."""
    import torch

    from translator.data.layout import read_references
    from translator.inference.text import Translator

    config = load_config(config_file, overrides)
    sources, _ = read_references(config.data.dir, "test")
    decode = dataclasses.replace(config.decode, precision="fp32")  # the figures measured
    engine = Translator.from_checkpoint(checkpoint, torch.device("cpu"), decode, engine="torch")
    engine = engine.with_decode(beam=beam)
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
    return [(statistics.median(t), out) for t, out in zip(times, outputs, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", required=True)
    parser.add_argument("--set", action="append", default=[], help="a config override")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--terms", required=True, help="a terminology test (term_test.py)")
    parser.add_argument("--entries", type=int, default=1_000_000, help="of the load test")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    config = load_config(args.config, args.set)
    terms = Glossary.load(args.terms).entries
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
        print(f"\n{'decoding the test split':44} {'beam':>4} {'sent/s':>7} {'ratio':>6}")
        for beam in dict.fromkeys((config.decode.beam, 1)):
            ways = [None, str(absent), str(with_terms)]
            (plain, before), *others = alone(
                decode, args.config, args.set, args.checkpoint, ways, beam, args.repeats
            )
            n = len(before)
            print(f"{'no glossary':44} {beam:4} {n / plain:7.1f} {1:6.2f}")
            for name, (took, after) in zip(("absent", "terms"), others, strict=True):
                if name == "absent":
                    same = sum(a == b for a, b in zip(before, after, strict=True))
                    print(f"  (outputs identical to no glossary's: {same} of {n})")
                held = "none in the text" if name == "absent" else "the terms test's"
                label = f"10,000 entries, {held}"
                print(f"{label:44} {beam:4} {n / took:7.1f} {plain / took:6.2f}")
                ratios[name + ("" if beam == config.decode.beam else "_greedy")] = round(
                    plain / took, 2
                )
    print("ratios: " + " ".join(f"{k}={v}" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
