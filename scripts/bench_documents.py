"""What a Word file costs over plain text of the same words (docs/documents.md#speed).

    python scripts/bench_documents.py --checkpoint runs/tatoeba-cpu/checkpoints/average5.pt

Builds a --pages (100) page .docx with python-docx: each page a heading and paragraphs of
distinct English sentences (--src, one a line; by default the English of the Tatoeba export
in ../shared/data, else of the bundled sample, whose sentences then repeat) holding about
--words-per-page (400) words, a bold word and an italic phrase in every other paragraph, a
2×3 table every fifth page, a header and a footer. Beside it, a .txt of the same units'
words, one a line. Both are translated by one model (`Translator.from_checkpoint`, the
checkpoint's decoding settings) through `translate_file`, the two taken in turn for
--repeats (3) rounds; each round's seconds, the median's pages a second, and the ratio
(the .docx's pages/s ÷ the .txt's). Ends with `ratios: docx_vs_txt=…`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from common import ROOT, TATOEBA

SAMPLE = ROOT / "data/sample/en-zh.tsv"


def english(src: Path | None) -> list[str]:
    """The distinct English sentences to build pages of: --src's lines, else the Tatoeba
    export's English, else the sample's."""
    if src is not None:
        lines = src.read_text(encoding="utf-8").splitlines()
    else:
        tsv = TATOEBA if TATOEBA.is_file() else SAMPLE
        rows = tsv.read_text(encoding="utf-8").splitlines()
        lines = [row.split("\t")[1] for row in rows if row.count("\t") >= 3]
    return list(dict.fromkeys(line.strip() for line in lines if line.strip()))


def pages_of(sentences: list[str], pages: int, words: int, seed: int = 0) -> list[list[str]]:
    """`pages` lists of paragraphs, each of 3–6 sentences drawn at random without
    replacement (a sentence comes again only once all have been drawn), about `words` words
    a page."""
    rng = random.Random(seed)
    pool: list[str] = []

    def draw() -> str:
        if not pool:
            pool.extend(rng.sample(sentences, len(sentences)))
        return pool.pop()

    out = []
    for _ in range(pages):
        page, count = [], 0
        while count < words:
            paragraph = " ".join(draw() for _ in range(rng.randint(3, 6)))
            page.append(paragraph)
            count += len(paragraph.split())
        out.append(page)
    return out


def add_paragraph(p, text: str, formatted: bool) -> None:
    """`text` as runs of `p`; where `formatted`, its longest word bold and the two words
    that follow it italic (what a writer stresses: words of content, in one sentence)."""
    words = text.split(" ")
    at = max(range(len(words) - 2), key=lambda i: len(words[i].strip(".,?!")), default=-1)
    if not formatted or at < 0 or not words[at].strip(".,?!").isalpha():
        p.add_run(text)
        return
    word = words[at].strip(".,?!")
    rest = words[at][len(word) :]
    p.add_run(" ".join(words[:at]) + (" " if at else ""))
    p.add_run(word).bold = True
    p.add_run(rest + " ")
    p.add_run(" ".join(words[at + 1 : at + 3])).italic = True
    p.add_run(" " + " ".join(words[at + 3 :]))


def write_docx(pages: list[list[str]], path: Path) -> list[str]:
    """The pages as a .docx; returns every unit's text in the order it was written."""
    import docx
    from docx.enum.text import WD_BREAK

    document, units = docx.Document(), []
    section = document.sections[0]
    section.header.paragraphs[0].text = "Quarterly report"
    section.footer.paragraphs[0].text = "Company confidential"
    units += ["Quarterly report", "Company confidential"]
    for number, page in enumerate(pages, 1):
        document.add_heading(f"Part {number}: {page[0].split('.')[0]}", level=2)
        units.append(f"Part {number}: {page[0].split('.')[0]}")
        for i, paragraph in enumerate(page):
            add_paragraph(document.add_paragraph(), paragraph, formatted=i % 2 == 1)
            units.append(paragraph)
        if number % 5 == 0:
            table = document.add_table(rows=2, cols=3)
            for cell, text in zip(table._cells, page[0].split(".")[:6], strict=False):
                cell.text = text.strip() or "Total"
                units.append(cell.text)
        document.paragraphs[-1].add_run().add_break(WD_BREAK.PAGE)
    document.save(path)
    return units


def timed(translator, src: Path, out: Path) -> tuple[float, object]:
    start = time.perf_counter()
    counts = translator.translate_file(src, out)
    return time.perf_counter() - start, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--src", type=Path, help="English sentences, one a line")
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--words-per-page", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    from translator.data.splitting import sentences
    from translator.inference.text import Translator

    translator = Translator.from_checkpoint(args.checkpoint, args.device)
    pages = pages_of(english(args.src), args.pages, args.words_per_page)
    with tempfile.TemporaryDirectory() as tmp:
        docx_path, txt_path = Path(tmp) / "report.docx", Path(tmp) / "report.txt"
        units = write_docx(pages, docx_path)
        txt_path.write_text("\n".join(units) + "\n", encoding="utf-8")
        words = sum(len(u.split()) for u in units)
        distinct = len({s for page in pages for p in page for s in sentences(p)})
        print(f"{args.pages} pages, {len(units):,} units, {words:,} words, ", end="")
        print(f"{distinct:,} distinct sentences")
        print(translator.engine_line)
        timed(translator, txt_path, Path(tmp) / "warm.txt")  # the first call's start-up
        seconds: dict[str, list[float]] = {"docx": [], "txt": []}
        for round_ in range(args.repeats):
            order = ["docx", "txt"] if round_ % 2 == 0 else ["txt", "docx"]
            for kind in order:
                src = docx_path if kind == "docx" else txt_path
                taken, counts = timed(translator, src, Path(tmp) / f"out.{kind}")
                seconds[kind].append(taken)
                print(f"round {round_ + 1}: .{kind} {taken:.2f} s; {counts}", flush=True)
    rates = {kind: args.pages / statistics.median(s) for kind, s in seconds.items()}
    for kind, rate in rates.items():
        print(f".{kind}: {statistics.median(seconds[kind]):.2f} s median, {rate:.2f} pages/s")
    print(f"ratios: docx_vs_txt={rates['docx'] / rates['txt']:.3f}")


if __name__ == "__main__":
    main()
