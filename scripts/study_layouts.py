"""What a student's layout costs on this machine: training target tokens/s and greedy
decoding sentences/s for each (encoder layers + decoder layers), side by side in one run.

    python scripts/study_layouts.py --set data.dir=data/prepared/tatoeba-3k
    python scripts/study_layouts.py -c configs/student-cpu.toml --layouts 3+3 6+1 6+2 8+1

Every layout is the config's model (d_model, heads, ff_dim) with other layer counts, freshly
initialised from the same seed (train.init_from and train.teacher are ignored), and is
trained and timed in a fresh process. Training: `common.tokens_per_s` over the Trainer's own
updates (`--seconds` each, after one update of each batch shape). Decoding: the test split's
English, greedy, in batches of decode.batch_size, every sentence made to write exactly
`--tokens` tokens (decode.max_len_a 0, max_len_b N, and EOS never chosen; the mean length
written is printed to show it), the best of `--repeats` passes. Output lengths are the same
for every layout, so the decoding column is the cost of the layout alone: choose a student's
layout by it, then train and score the one chosen. The first layout is the baseline of the
ratios, and also decodes with beam 5 (the reference a greedy student has to beat, issue 47:
3× its sentences/s).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
from common import alone, load_config, timed_runs, with_values
from step_measures import tokens_per_s

from translator.config import DecodeConfig
from translator.data.layout import read_references, split_file
from translator.data.tokenizer import EOS
from translator.inference.torch_engine import Translator, for_decoding
from translator.model.transformer import Transformer
from translator.runtime import keep_freed_memory
from translator.training.trainer import Trainer

REPEAT_SECONDS = 120.0  # a layout's timed decoding passes stop once they have taken this long


class NeverEnds(torch.nn.Module):
    """The output projection with EOS never chosen: every sentence runs to its limit."""

    def __init__(self, project: torch.nn.Module):
        super().__init__()
        self.inner, self.out_features = project, project.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.inner(x)
        logits[..., EOS] = float("-inf")
        return logits


def decode_rate(trainer: Trainer, sources: list[str], tokens: int, beam: int, repeats: int):
    """Sentences/s of the trainer's model decoding `sources` to `tokens` tokens each, and
    the mean number of tokens written."""
    decode = DecodeConfig(beam=beam, max_len_a=0, max_len_b=tokens, length_penalty=0.0)
    src_tok, tgt_tok = trainer.src_tok, trainer.tgt_tok
    model = Transformer(trainer.config.model, src_tok.get_piece_size(), tgt_tok.get_piece_size())
    model.load_state_dict(trainer.model.state_dict())  # as trained, without training's wrappers
    for_decoding(model, decode)
    model.project = NeverEnds(model.project)
    translator = Translator(model, src_tok, tgt_tok, decode)
    encoded = translator.encode(sources)
    outputs, times = timed_runs(lambda: translator.search(encoded), repeats, REPEAT_SECONDS)
    written = statistics.mean(len(o) for o in outputs)
    return len(sources) / min(times), written


def measure(config, layout: str, sources: list[str], args, beam: bool) -> tuple:
    """A row of the table for `layout` ("E+D"), as plain values: main runs it `alone`."""
    keep_freed_memory()
    encoder, decoder = (int(n) for n in layout.split("+"))
    torch.manual_seed(0)
    fresh = with_values(
        config,
        model__encoder_layers=encoder,
        model__decoder_layers=decoder,
        train__init_from="",  # not the teacher's weights: a layout its layers cannot fill
        train__teacher="",  # and the layout's own speed, without a teacher's forward pass
    )
    trainer = Trainer(fresh, progress=False)
    params = sum(p.numel() for p in trainer.model.parameters())
    train = tokens_per_s(trainer, args.seconds, shapes=None)
    greedy, written = decode_rate(trainer, sources, args.tokens, 1, args.repeats)
    beam_rate = decode_rate(trainer, sources, args.tokens, 5, args.repeats)[0] if beam else 0
    return layout, params, train, greedy, written, beam_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", default="configs/student-cpu.toml")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--layouts", nargs="+", default=["3+3", "6+1", "6+2", "4+1", "8+1"])
    parser.add_argument("--seconds", type=float, default=15.0, help="training, per layout")
    parser.add_argument("--tokens", type=int, default=12, help="decoded per sentence")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = load_config(args.config, args.overrides)
    if not split_file(config.data.dir, "test", "en").is_file():
        sys.exit(f"error: no prepared data in {config.data.dir}: run `translator prepare` first")
    sources = read_references(config.data.dir, "test")[0]
    rows = []
    for layout in args.layouts:
        beam = not rows  # the first layout, the baseline, also decodes with beam 5
        row = alone(measure, config, layout, sources, args, beam)
        rows.append(row)
        print(f"{layout}: {row[1]:,} parameters, {row[2]:,.0f} tok/s, greedy {row[3]:,.0f} sent/s")
    base = rows[0]
    print(
        f"\n{len(sources):,} test sentences, {args.tokens} tokens each; "
        f"{base[0]} with beam 5: {base[5]:,.0f} sentences/s\n"
    )
    print(
        "| layout | parameters | train tok/s | × | greedy sent/s | × | × beam 5 of "
        f"{base[0]} | tokens written |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for layout, params, train, greedy, written, _ in rows:
        print(
            f"| {layout} | {params / 1e6:.1f}M | {train:,.0f} | {train / base[2]:.2f} | "
            f"{greedy:,.0f} | {greedy / base[3]:.2f} | {greedy / base[5]:.2f} | {written:.1f} |"
        )


if __name__ == "__main__":
    main()
