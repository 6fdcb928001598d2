"""Our PyTorch model as the engine: `Translator`, the public Python API.

    from translator import Translator
    translator = Translator.from_run("runs/tatoeba-cpu")
    translator.translate(["Hello.", "How are you?"], beam=5)

It loads a checkpoint once (model, tokenizers, config) and searches (greedy, beam search or
sampling: search.py) over batches the shared text path (text.py) prepares.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from translator.config import Config, DecodeConfig, from_dict
from translator.data import names
from translator.data.batching import pad
from translator.data.tokenizer import Tokenizer, load_tokenizer
from translator.inference import precision as precisions
from translator.inference.constraints import Constraints
from translator.inference.onednn import use_onednn
from translator.inference.search import NEVER_OUTPUT, Found, search
from translator.inference.text import TextTranslator, changed, overrides
from translator.model.checkpoint import load as load_checkpoint
from translator.model.rundir import RunDir
from translator.model.transformer import Transformer
from translator.runtime import pick_device


class Translator(TextTranslator):
    """Our PyTorch model as the engine."""

    def __init__(
        self,
        model: Transformer,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        decode_cfg: DecodeConfig,
        src_prefix: str = "",
    ):
        positions = model.model_cfg.max_positions
        super().__init__(src_tok, tgt_tok, decode_cfg, positions, src_prefix)
        self.model = model
        self.config: Config | None = None  # the checkpoint's, when loaded from one
        self.imported: dict | None = None  # origin and licence, for an import-hf checkpoint

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        device: str | torch.device = "auto",
        decode_cfg: DecodeConfig | None = None,
        *,
        beam: int | None = None,
        length_penalty: float | None = None,
        precision: str | None = None,
    ) -> Translator:
        """The model and tokenizers saved in a checkpoint, loaded once. Decoding settings:
        `decode_cfg`, else the ones the checkpoint was trained with; `beam`,
        `length_penalty` and `precision` ("fp32", "bf16", "int8" or "auto": the weights
        decoded with) override either. The checkpoint's config is `.config`."""
        payload = load_checkpoint(path)
        config = from_dict(payload["config"])
        src_tok = load_tokenizer(payload["tokenizer_models"]["src"])
        tgt_tok = load_tokenizer(payload["tokenizer_models"]["tgt"])
        model = Transformer(config.model, src_tok.get_piece_size(), tgt_tok.get_piece_size())
        model.load_state_dict(payload["model"])
        changes = overrides(beam, length_penalty) | ({"precision": precision} if precision else {})
        decode_cfg = changed(decode_cfg or config.decode, **changes)
        device = pick_device(device) if isinstance(device, str) else device
        chosen, why = precisions.resolve(decode_cfg.precision, device)
        model = for_decoding(model.to(device), decode_cfg, chosen)
        translator = cls(model, src_tok, tgt_tok, decode_cfg, config.data.src_prefix)
        translator.precision, translator.precision_reason = chosen, why
        translator.config = config
        translator.imported = payload.get("imported")
        translator.known_words = names.known(names.listed(payload.get("source_words")))
        return translator

    @classmethod
    def from_run(cls, run_dir: str | Path, device: str | torch.device = "auto", **options):
        """The best checkpoint of a training run directory (`train.run_dir`)."""
        return cls.from_checkpoint(RunDir(run_dir).best, device, **options)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def hypotheses(
        self,
        sources: Sequence[np.ndarray],
        guarded: Sequence[bool] | None = None,
        terms: Sequence[Sequence[list[int]]] | None = None,
    ) -> Found:
        """Source ids → each one's hypotheses, in input order. Sentences are sorted by
        length into batches of `decode.batch_size`, and searched as `[decode]` asks
        (search.py); each may write `max_len_a × source length + max_len_b` tokens, a
        `guarded` one no digit, and one with `terms` holds them (constrained search).
        Sampling draws from a generator seeded with `decode.seed` for each call."""
        decode_cfg = self.decode_cfg
        generator = None
        if decode_cfg.sample:
            generator = torch.Generator(self.device).manual_seed(decode_cfg.seed)
        was_training = self.model.training
        self.model.eval()
        outputs: Found = [[] for _ in sources]
        for rows, guard, bound in self.batches(sources, guarded, terms):
            src = pad([sources[i] for i in rows]).to(self.device)
            max_lens = self.limits([len(sources[i]) for i in rows])
            never = NEVER_OUTPUT + self.digit_pieces if guard else NEVER_OUTPUT
            given = None
            if bound:
                vocab = self.tgt_tok.get_piece_size()
                ends, rows_terms = self.sentence_ends, [terms[i] for i in rows]
                given = Constraints.of(rows_terms, vocab, ends, self.device)
            found = search(self.model, src, max_lens, decode_cfg, generator, never, given)
            for i, hypotheses in zip(rows, found, strict=True):
                outputs[i] = hypotheses
        self.model.train(was_training)
        return outputs


def for_decoding(model: Transformer, decode_cfg: DecodeConfig, chosen: str = "fp32") -> Transformer:
    """`model` set up to decode and nothing else: eval mode, in the `chosen` precision
    (precision.py), and in fp32 on the CPU its linear layers through oneDNN (`decode.onednn`)."""
    model = precisions.apply(model.eval(), chosen)
    if chosen == "fp32" and next(model.parameters()).device.type == "cpu":
        use_onednn(model, decode_cfg.onednn)
    return model
