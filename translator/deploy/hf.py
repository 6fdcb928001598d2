"""Our checkpoints ↔ Hugging Face `transformers` directories (`translator export --format
hf`, `translator import-hf`; docs/deploy.md).

Post-norm models are `MarianMTModel`, pre-norm ones `PegasusForConditionalGeneration`; both
add the same sinusoids as ours, but all sines first where ours interleave them, so every
tensor that reads or writes the hidden state is permuted along that axis (`hidden_order`),
the attention heads' own spaces untouched. Both sides share one vocabulary (`Vocabularies`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from translator.config import Config, ModelConfig, from_dict
from translator.data.tokenizer import BOS, EOS, PAD, load_tokenizer
from translator.errors import UserError
from translator.inference.engine import NEVER_OUTPUT
from translator.model.checkpoint import digest, save
from translator.model.checkpoint import load as load_checkpoint

NOT_A_PIECE = -1e4  # final_logits_bias of rows never to be chosen: no target piece, NEVER_OUTPUT
METADATA = "translator.json"
ARCHITECTURES = {"post": "marian", "pre": "pegasus"}
MODELS = {"marian": "MarianMTModel", "pegasus": "PegasusForConditionalGeneration"}


def require_transformers():
    try:
        import transformers
    except ImportError:
        raise UserError(
            "this needs the `hf` extra: pip install 'translator[hf]' (transformers, safetensors)"
        ) from None
    return transformers


def hidden_order(d_model: int) -> torch.Tensor:
    """Their hidden dimension j is our dimension order[j]: sines first, then cosines."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


@dataclass(frozen=True)
class Entry:
    """One of their tensors and where it is in ours: `axis` runs over the hidden state
    (0 or 1; None: neither), `part` = (k, n) is the k-th of n row blocks of our tensor."""

    theirs: str
    ours: str
    axis: int | None
    part: tuple[int, int] | None = None


def _linear(theirs: str, ours: str, reads: bool, part=None) -> list[Entry]:
    """A projection that reads the hidden state (its weight's columns run over it) or
    writes it (its weight's rows and its bias do)."""
    return [
        Entry(f"{theirs}.weight", f"{ours}.weight", 1 if reads else 0, part),
        Entry(f"{theirs}.bias", f"{ours}.bias", None if reads else 0, part),
    ]


def _norm(theirs: str, ours: str) -> list[Entry]:
    return [Entry(f"{theirs}.{p}", f"{ours}.{p}", 0) for p in ("weight", "bias")]


def _attention(theirs: str, ours: str, fused: tuple[str, ...]) -> list[Entry]:
    """q, k and v from our fused projections (("qkv",) or ("q", "kv")), and the output."""
    names = iter("qkv")
    entries = []
    for projection in fused:
        for k in range(len(projection)):
            part = (k, len(projection)) if len(projection) > 1 else None
            entries += _linear(f"{theirs}.{next(names)}_proj", f"{ours}.{projection}", True, part)
    return entries + _linear(f"{theirs}.out_proj", f"{ours}.out", False)


def _feed_forward(theirs: str, ours: str) -> list[Entry]:
    return _linear(f"{theirs}.fc1", f"{ours}.ff.0", True) + _linear(
        f"{theirs}.fc2", f"{ours}.ff.3", False
    )


def layer_entries(model_cfg: ModelConfig) -> list[Entry]:
    """Every tensor of the layers and final norms (embeddings and output apart)."""
    entries = []
    for i in range(model_cfg.encoder_layers):
        theirs, ours = f"model.encoder.layers.{i}", f"encoder.{i}"
        entries += _attention(f"{theirs}.self_attn", f"{ours}.attn", ("qkv",))
        entries += _norm(f"{theirs}.self_attn_layer_norm", f"{ours}.attn_block.norm")
        entries += _feed_forward(theirs, ours)
        entries += _norm(f"{theirs}.final_layer_norm", f"{ours}.ff_block.norm")
    for i in range(model_cfg.decoder_layers):
        theirs, ours = f"model.decoder.layers.{i}", f"decoder.{i}"
        entries += _attention(f"{theirs}.self_attn", f"{ours}.self_attn", ("qkv",))
        entries += _norm(f"{theirs}.self_attn_layer_norm", f"{ours}.self_block.norm")
        entries += _attention(f"{theirs}.encoder_attn", f"{ours}.cross_attn", ("q", "kv"))
        entries += _norm(f"{theirs}.encoder_attn_layer_norm", f"{ours}.cross_block.norm")
        entries += _feed_forward(theirs, ours)
        entries += _norm(f"{theirs}.final_layer_norm", f"{ours}.ff_block.norm")
    if model_cfg.norm == "pre":
        entries += _norm("model.encoder.layer_norm", "encoder_norm")
        entries += _norm("model.decoder.layer_norm", "decoder_norm")
    return entries


def _theirs_of(tensor: torch.Tensor, entry: Entry, order: torch.Tensor) -> torch.Tensor:
    if entry.part is not None:
        tensor = tensor.chunk(entry.part[1], dim=0)[entry.part[0]]
    if entry.axis is not None:
        tensor = tensor.index_select(entry.axis, order)
    return tensor.contiguous()


@dataclass(frozen=True)
class Vocabularies:
    """One vocabulary for both sides, as OPUS-MT's directories and CTranslate2's converter
    have it: the target's pieces, the source's pieces the target lacks, then `<pad>`, which
    starts decoding (the converter drops a last `<pad>` from a Marian model). Each stack has
    its own matrix over these rows; the decoder's `<pad>` row holds our <s> embedding and its
    `<s>` row our <pad>: `parked` records that swap, so that a round trip is exact."""

    pieces: tuple[str, ...]  # their rows
    src: tuple[int, ...]  # their row of each of our source ids
    tgt: tuple[int, ...]  # their row of each of our target ids

    @classmethod
    def of(cls, src_pieces: list[str], tgt_pieces: list[str]) -> Vocabularies:
        theirs = set(tgt_pieces)
        pieces = [p for p in tgt_pieces if p != "<pad>"]
        pieces += [p for p in src_pieces if p not in theirs] + ["<pad>"]
        row = {piece: n for n, piece in enumerate(pieces)}
        tgt = [row[p] for p in tgt_pieces]
        tgt[PAD], tgt[BOS] = tgt[BOS], tgt[PAD]
        return cls(tuple(pieces), tuple(row[p] for p in src_pieces), tuple(tgt))

    @property
    def size(self) -> int:
        return len(self.pieces)

    def row(self, piece: str) -> int:
        return self.pieces.index(piece)

    def parked(self) -> dict[str, dict[int, int]]:
        """Our target ids whose rows are not their piece's: <pad> at <s>'s."""
        return {"tgt": {PAD: self.tgt[PAD]}}


def to_hf_state(
    model_cfg: ModelConfig, weights: dict[str, torch.Tensor], vocab: Vocabularies
) -> dict[str, torch.Tensor]:
    """Their state dict (model and lm_head, positions left to them) for our `weights`."""
    order = hidden_order(model_cfg.d_model)
    state = {e.theirs: _theirs_of(weights[e.ours], e, order) for e in layer_entries(model_cfg)}

    def rows(tensor: torch.Tensor, at: tuple[int, ...]) -> torch.Tensor:
        out = tensor.new_zeros(vocab.size, *tensor.shape[1:])
        out[torch.tensor(at)] = tensor
        return out

    encoder = rows(weights["src_embed.tokens.weight"][:, order], vocab.src)
    decoder = rows(weights["tgt_embed.tokens.weight"][:, order], vocab.tgt)
    if model_cfg.zero_start:  # what their decoder reads first: zero, as ours does
        decoder[vocab.tgt[BOS]] = 0
    state["model.encoder.embed_tokens.weight"] = encoder
    state["model.decoder.embed_tokens.weight"] = decoder
    if model_cfg.norm == "pre":  # Pegasus' `shared`: what get_input_embeddings answers
        state["model.shared.weight"] = encoder
    if model_cfg.tie_embeddings and model_cfg.norm == "post":  # Marian's lm_head: that matrix
        state["lm_head.weight"] = decoder
    else:  # Pegasus ties lm_head to `shared`, the encoder's: stored apart
        project = "tgt_embed.tokens.weight" if model_cfg.tie_embeddings else "project.weight"
        state["lm_head.weight"] = rows(weights[project][:, order], vocab.tgt)
    bias = torch.full((1, vocab.size), NOT_A_PIECE)
    bias[0, torch.tensor(vocab.tgt)] = weights.get("project.bias", torch.zeros(len(vocab.tgt)))
    bias[0, [vocab.tgt[i] for i in NEVER_OUTPUT]] = NOT_A_PIECE
    state["final_logits_bias"] = bias
    return state


def hf_config(model_cfg: ModelConfig, vocab: Vocabularies, transformers) -> Any:
    """Their model config for ours, with the keys CTranslate2's converter reads of it."""
    common = dict(
        vocab_size=vocab.size,
        d_model=model_cfg.d_model,
        encoder_layers=model_cfg.encoder_layers,
        decoder_layers=model_cfg.decoder_layers,
        encoder_attention_heads=model_cfg.heads,
        decoder_attention_heads=model_cfg.heads,
        encoder_ffn_dim=model_cfg.ff_dim,
        decoder_ffn_dim=model_cfg.ff_dim,
        activation_function=model_cfg.activation,  # relu, gelu, swish: the same names
        dropout=model_cfg.dropout,
        attention_dropout=model_cfg.attention_p,
        activation_dropout=model_cfg.dropout,
        max_position_embeddings=model_cfg.max_positions,
        scale_embedding=True,
        pad_token_id=vocab.row("<pad>"),
        bos_token_id=vocab.row("<pad>"),
        eos_token_id=vocab.row("</s>"),
        decoder_start_token_id=vocab.row("<pad>"),
        forced_eos_token_id=None,
        tie_word_embeddings=model_cfg.tie_embeddings and model_cfg.norm == "post",
        is_encoder_decoder=True,
        normalize_before=model_cfg.norm == "pre",  # as real Pegasus configs say it
        normalize_embedding=False,
    )
    if model_cfg.norm == "pre":
        return transformers.PegasusConfig(**common)
    return transformers.MarianConfig(
        **common, decoder_vocab_size=vocab.size, share_encoder_decoder_embeddings=False
    )


def _tokenizer_files(out: Path, models: dict, vocab: Vocabularies):
    """Both SentencePiece models and the one vocabulary, written twice, for MarianTokenizer."""
    (out / "source.spm").write_bytes(models["src"])
    (out / "target.spm").write_bytes(models["tgt"])
    rows = json.dumps({p: r for r, p in enumerate(vocab.pieces)}, ensure_ascii=False, indent=0)
    for name in ("vocab.json", "target_vocab.json"):
        (out / name).write_text(rows + "\n", encoding="utf-8")
    settings = {
        "tokenizer_class": "MarianTokenizer",
        "separate_vocabs": True,  # decode by target.spm: source.spm writes <0xE4> as read
        "source_lang": "en",
        "target_lang": "zh",
        "unk_token": "<unk>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        "model_max_length": 512,
    }
    (out / "tokenizer_config.json").write_text(
        json.dumps(settings, indent=2) + "\n", encoding="utf-8"
    )


def _pieces(tokenizer) -> list[str]:
    return [tokenizer.id_to_piece(i) for i in range(tokenizer.get_piece_size())]


class Exported(NamedTuple):
    path: Path
    architecture: str  # "marian" or "pegasus"
    caveat: str  # why ct2-transformers-converter would not convert it exactly, or ""


CONVERTER_CAVEAT = (
    "ct2-transformers-converter starts a Marian model's decoder from a zero embedding, and "
    "this post-norm model starts from its own <s>: transformers decodes the export as we do, "
    "the converter's model will not; train with model.zero_start = true for one that converts "
    "exactly"
)


def export_hf(checkpoint: Path, out: Path, force: bool = False) -> Exported:
    """Write the transformers directory `out` for `checkpoint`."""
    transformers = require_transformers()
    if int(transformers.__version__.split(".")[0]) < 5:  # ties Pegasus' two embeddings
        raise UserError(
            f"export --format hf needs transformers 5 or later (this is "
            f"{transformers.__version__}): pip install 'translator[hf]'"
        )
    if out.exists() and not force:
        raise UserError(f"{out} exists; pass --force to replace it")
    payload = load_checkpoint(checkpoint)
    model_cfg = from_dict(payload["config"]).model
    architecture = ARCHITECTURES[model_cfg.norm]
    models = payload["tokenizer_models"]
    vocab = Vocabularies.of(*(_pieces(load_tokenizer(models[side])) for side in ("src", "tgt")))
    weights = {name: t.detach().float().cpu() for name, t in payload["model"].items()}
    model = getattr(transformers, MODELS[architecture])(hf_config(model_cfg, vocab, transformers))
    state = to_hf_state(model_cfg, weights, vocab)  # all but the position tables they compute
    missing, unexpected = model.load_state_dict(state, strict=False)
    left = [k for k in missing if "embed_positions" not in k]
    if left or unexpected:
        raise UserError(f"the weights do not fit {type(model).__name__}: {left or unexpected}")
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=vocab.row("<pad>"),
        bos_token_id=vocab.row("<pad>"),
        eos_token_id=vocab.row("</s>"),
        pad_token_id=vocab.row("<pad>"),
        suppress_tokens=[vocab.tgt[i] for i in NEVER_OUTPUT],
        num_beams=1,
        do_sample=False,
        max_length=model_cfg.max_positions,
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    _tokenizer_files(out, models, vocab)
    metadata = {
        "checkpoint": str(checkpoint),
        "sha256": digest(checkpoint),
        "architecture": architecture,
        "vocabularies": {"size": vocab.size, "src": len(vocab.src), "tgt": len(vocab.tgt)},
        "parked": vocab.parked(),
        "config": payload["config"],
    }
    (out / METADATA).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    start = weights["tgt_embed.tokens.weight"][BOS]
    unconverted = architecture == "marian" and not model_cfg.zero_start and bool(start.any())
    return Exported(out, architecture, CONVERTER_CAVEAT if unconverted else "")


# ---- transformers directory → our checkpoint (`translator import-hf`) ----

FITTING = {"marian": "post", "pegasus": "pre"}
THEIR_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")  # our ids 0…3


@dataclass
class Imported:
    path: Path
    architecture: str
    sizes: tuple[int, int]  # source and target pieces
    origin: dict


def _their_directory(directory: Path) -> dict:
    """Their config.json, or one line saying why the directory cannot be read."""
    if not directory.is_dir():
        raise UserError(
            f"{directory} is not a local directory: nothing is downloaded here; fetch the "
            f"model first (huggingface-cli download {directory} --local-dir DIR) and pass DIR"
        )
    config = directory / "config.json"
    if not config.is_file():
        raise UserError(f"{directory} has no config.json: not a transformers model directory")
    return json.loads(config.read_text(encoding="utf-8"))


def our_model_config(hf: dict) -> ModelConfig:
    """Our model section for their config, or one line naming what does not fit."""
    kind = hf.get("model_type")
    if kind not in FITTING:
        raise UserError(
            f"model_type {kind!r} does not fit: import-hf reads marian (post-norm) and "
            "pegasus (pre-norm) encoder–decoders with sinusoidal positions"
        )
    misfits = []
    heads = hf.get("encoder_attention_heads"), hf.get("decoder_attention_heads")
    ffn = hf.get("encoder_ffn_dim"), hf.get("decoder_ffn_dim")
    if heads[0] != heads[1]:
        misfits.append(f"encoder/decoder attention heads {heads[0]}/{heads[1]} differ")
    if ffn[0] != ffn[1]:
        misfits.append(f"encoder/decoder ffn_dim {ffn[0]}/{ffn[1]} differ")
    if not hf.get("scale_embedding", False):
        misfits.append("scale_embedding is false")
    if hf.get("activation_function") not in THEIR_ACTIVATIONS:
        misfits.append(f"activation_function {hf.get('activation_function')!r}")
    for key, fitting in (
        ("normalize_embedding", False),
        ("add_final_layer_norm", False),
        ("static_position_embeddings", True),
        ("normalize_before", FITTING[kind] == "pre"),
    ):
        if key in hf and hf[key] != fitting:
            misfits.append(f"{key} is {hf[key]}")
    if hf.get("d_model", 1) % 2:
        misfits.append(f"d_model {hf.get('d_model')} is odd")
    if misfits:
        raise UserError(f"this {kind} model does not fit ours: {'; '.join(misfits)}")
    return ModelConfig(
        encoder_layers=hf["encoder_layers"],
        decoder_layers=hf["decoder_layers"],
        d_model=hf["d_model"],
        heads=heads[0],
        ff_dim=ffn[0],
        dropout=float(hf.get("dropout", 0.1)),
        attention_dropout=float(hf.get("attention_dropout", 0.0)),
        max_positions=hf["max_position_embeddings"],
        norm=FITTING[kind],
        activation=THEIR_ACTIVATIONS[hf["activation_function"]],
    )


@dataclass(frozen=True)
class Side:
    """One side's pieces as ours will number them, and the row of theirs each reads."""

    pieces: list[str]
    rows: list[int]


def _side(vocab: dict[str, int], specials: dict[str, int], pieces: list[str]) -> Side:
    """Our specials first (ids 0…3, from the rows `specials` names), then `pieces` in order."""
    rest = [piece for piece in pieces if piece not in SPECIALS]
    return Side(
        [*SPECIALS, *rest], [specials[name] for name in SPECIALS] + [vocab[p] for p in rest]
    )


def _our_tokenizer(model: bytes, side: Side) -> bytes:
    """Their SentencePiece model with its pieces in our order and our special ids: it
    segments text as theirs does, and holds the pieces it lacks as unused ones."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    kinds = pb.ModelProto.SentencePiece
    known = {p.piece: p for p in proto.pieces}
    pieces = []
    for n, name in enumerate(side.pieces):
        piece = kinds()
        if name in known:
            piece.CopyFrom(known[name])
        else:
            piece.piece, piece.score, piece.type = name, 0.0, kinds.UNUSED
        if n < len(SPECIALS):
            piece.type = kinds.UNKNOWN if name == "<unk>" else kinds.CONTROL
        pieces.append(piece)
    del proto.pieces[:]
    proto.pieces.extend(pieces)
    spec = proto.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = PAD, 1, BOS, EOS
    spec.pad_piece, spec.unk_piece, spec.bos_piece, spec.eos_piece = SPECIALS
    return proto.SerializeToString()


def _read_vocabularies(
    directory: Path, hf: dict, ours: bool
) -> tuple[Side, Side, dict[str, bytes]]:
    """Each side's pieces and rows from MarianTokenizer's files, and our two tokenizers; the
    target keeps every piece of a joint vocabulary, or of our export's target tokenizer."""
    files = {name: directory / name for name in ("source.spm", "target.spm", "vocab.json")}
    if absent := [name for name, path in files.items() if not path.is_file()]:
        raise UserError(f"{directory} lacks {', '.join(absent)}: import-hf reads Marian tokenizers")
    settings = _json(directory / "tokenizer_config.json", {})
    src_vocab = json.loads(files["vocab.json"].read_text(encoding="utf-8"))
    tgt_vocab = src_vocab
    if settings.get("separate_vocabs"):
        tgt_vocab = json.loads((directory / "target_vocab.json").read_text(encoding="utf-8"))
    pad = hf.get("pad_token_id", src_vocab.get("<pad>"))
    named = lambda vocab, fallback: {  # noqa: E731
        name: vocab.get(name, fallback.get(name, pad)) for name in SPECIALS
    }
    source_spm, target_spm = files["source.spm"].read_bytes(), files["target.spm"].read_bytes()
    if ours:  # each side's pieces as its tokenizer orders them
        src_pieces, tgt_pieces = _spm_pieces(source_spm), _spm_pieces(target_spm)
    else:  # their order; the source keeps what its tokenizer can produce and >>xx<< tokens
        known = set(_spm_pieces(source_spm))
        tgt_pieces = sorted(tgt_vocab, key=tgt_vocab.__getitem__)
        src_pieces = [
            p
            for p in sorted(src_vocab, key=src_vocab.__getitem__)
            if p in known or (p.startswith(">>") and p.endswith("<<"))
        ]
    src = _side(src_vocab, named(src_vocab, {"<pad>": pad}), src_pieces)
    start = hf.get("decoder_start_token_id", pad)
    tgt = _side(tgt_vocab, named(tgt_vocab, {"<pad>": pad}) | {"<s>": start}, tgt_pieces)
    models = {"src": _our_tokenizer(source_spm, src), "tgt": _our_tokenizer(target_spm, tgt)}
    return src, tgt, models


def _spm_pieces(model: bytes) -> list[str]:
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    return [p.piece for p in proto.pieces]


def from_hf_state(
    model_cfg: ModelConfig,
    theirs: dict[str, torch.Tensor],
    src: Side,
    tgt: Side,
    parked: dict[str, dict] | None = None,
) -> dict[str, torch.Tensor]:
    """Our state dict for theirs: the inverse of `to_hf_state` (`parked`: its swapped rows)."""
    back = torch.argsort(hidden_order(model_cfg.d_model))
    weights: dict[str, list] = {}
    for entry in layer_entries(model_cfg):
        tensor = theirs[entry.theirs]
        if entry.axis is not None:
            tensor = tensor.index_select(entry.axis, back)
        weights.setdefault(entry.ours, []).append(tensor)
    state = {
        name: torch.cat(parts) if len(parts) > 1 else parts[0] for name, parts in weights.items()
    }
    shared = theirs.get("model.shared.weight")
    encoder = theirs.get("model.encoder.embed_tokens.weight", shared)
    decoder = theirs.get("model.decoder.embed_tokens.weight", shared)
    parked = parked or {}

    def pick(matrix: torch.Tensor, side: Side, name: str) -> torch.Tensor:
        rows = list(side.rows)
        for ours, row in parked.get(name, {}).items():
            rows[int(ours)] = row
        return matrix[torch.tensor(rows)][:, back]

    state["src_embed.tokens.weight"] = pick(encoder, src, "src")
    state["tgt_embed.tokens.weight"] = pick(decoder, tgt, "tgt")
    state["project.weight"] = pick(theirs["lm_head.weight"], tgt, "tgt")
    if model_cfg.output_bias:
        state["project.bias"] = theirs["final_logits_bias"][0, torch.tensor(tgt.rows)]
    return {name: t.contiguous().clone() for name, t in state.items()}


def import_hf(
    directory: Path, out: Path, target_token: str | None = None, force: bool = False
) -> Imported:
    """Write our checkpoint `out` for the transformers directory `directory`."""
    transformers = require_transformers()
    hf = _their_directory(directory)
    model_cfg = our_model_config(hf)
    if out.exists() and not force:
        raise UserError(f"{out} exists; pass --force to replace it")
    ours = _json(directory / METADATA)  # our own export's record: its tying and parked rows
    src, tgt, models = _read_vocabularies(directory, hf, ours is not None)
    if target_token is not None and target_token not in src.pieces:
        raise UserError(f"--target-token {target_token!r} is not in {directory}/vocab.json")
    model = getattr(transformers, MODELS[hf["model_type"]]).from_pretrained(
        directory, local_files_only=True
    )
    theirs = {name: t.detach().float() for name, t in model.state_dict().items()}
    rows = torch.tensor(tgt.rows)
    written = torch.tensor([r for i, r in enumerate(tgt.rows) if i not in NEVER_OUTPUT])
    bias = theirs.get("final_logits_bias", torch.zeros(1, 1))[0]
    decoder = theirs.get("model.decoder.embed_tokens.weight", theirs.get("model.shared.weight"))
    tied = torch.equal(theirs["lm_head.weight"][rows], decoder[rows])
    recorded = ours["config"]["model"] if ours else {}
    model_cfg = dataclasses.replace(
        model_cfg,
        tie_embeddings=bool(recorded.get("tie_embeddings", tied)),
        output_bias=bool(bias[written].ne(0).any()) if len(bias) > 1 else False,
        # a Marian whose start row is zero starts from zero, as its converter assumes
        zero_start=bool(recorded.get("zero_start", not decoder[tgt.rows[BOS]].any())),
    )
    config = Config(model=model_cfg)
    config.data.src_vocab_size, config.data.tgt_vocab_size = len(src.pieces), len(tgt.pieces)
    config.data.src_prefix = target_token or ""
    config.check()
    origin = {
        "from": str(directory.resolve()),
        "model_type": hf["model_type"],
        "name_or_path": hf.get("_name_or_path", ""),
        "license": _licence(directory),
        "target_token": target_token or "",
    }
    if ours:
        origin["exported_from"] = ours.get("checkpoint", "")
    weights = from_hf_state(model_cfg, theirs, src, tgt, ours.get("parked") if ours else None)
    if model_cfg.tie_embeddings:  # one tensor, as the model holds it
        weights["project.weight"] = weights["tgt_embed.tokens.weight"]
    payload = {
        "config": config.to_dict(),
        "tokenizers": {"src": "source.spm", "tgt": "target.spm"},
        "tokenizer_models": models,
        "model": weights,
        "imported": origin,
    }
    save(payload, out)
    return Imported(out, hf["model_type"], (len(src.pieces), len(tgt.pieces)), origin)


def _json(path: Path, absent: dict | None = None) -> dict | None:
    """A JSON file's object, or `absent` where there is no such file."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else absent


def _licence(directory: Path) -> str:
    """The `license:` of the model card's front matter (README.md), if it names one."""
    card = directory / "README.md"
    if not card.is_file():
        return ""
    lines = card.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or lines[0].strip() != "---":
        return ""
    for line in lines[1:]:
        if line.strip() == "---":
            break
        if line.startswith("license:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    return ""
