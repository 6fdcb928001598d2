"""Our checkpoints ↔ Hugging Face `transformers` directories (`translator export --format
hf`, `translator import-hf`).

Post-norm models are `MarianMTModel`, pre-norm ones `PegasusForConditionalGeneration`
(pre-norm layers, a final layer norm per stack); both scale embeddings by √D and add the
same sinusoids as ours, with all sines first and then all cosines where ours interleave
them (even dimensions sin, odd cos). So every tensor that reads or writes the hidden state
is permuted along that axis (`hidden_order`: theirs[j] = ours[order[j]], order = 0, 2, 4,
…, 1, 3, 5, …): input columns of each projection reading it, output rows and biases of each
writing it, layer-norm weights, embedding and output-projection columns. The attention
heads' own spaces are not touched.

    ours                          Marian / Pegasus
    src_embed.tokens  [Vs, D]     model.encoder.embed_tokens / model.shared (`Vocabularies`)
    tgt_embed.tokens  [Vt, D]     model.decoder.embed_tokens / model.shared rows 0…Vt
    encoder.i.attn.qkv (3 parts)  model.encoder.layers.i.self_attn.{q,k,v}_proj
    encoder.i.attn.out            ….self_attn.out_proj
    encoder.i.attn_block.norm     ….self_attn_layer_norm
    encoder.i.ff.0 / ff.3         ….fc1 / fc2
    encoder.i.ff_block.norm       ….final_layer_norm
    decoder.i.self_attn           model.decoder.layers.i.self_attn
    decoder.i.self_block.norm     ….self_attn_layer_norm
    decoder.i.cross_attn.q, kv    ….encoder_attn.q_proj, {k,v}_proj (kv in 2 parts)
    decoder.i.cross_attn.out      ….encoder_attn.out_proj
    decoder.i.cross_block.norm    ….encoder_attn_layer_norm
    encoder_norm, decoder_norm    model.encoder.layer_norm, model.decoder.layer_norm (pre-norm)
    project [Vt, D] (+ bias)      lm_head rows 0…Vt (+ final_logits_bias)

Vocabularies: ours are separate (source and target SentencePiece models, ids 0…V-1 with
pad 0, unk 1, bos 2, eos 3). Marian gets both embedding matrices padded to one size;
Pegasus, which shares one matrix, gets the target's pieces first and the source's after
them, the special ids shared (`Vocabularies`). Rows that are not target pieces get a
−1e4 `final_logits_bias`, so they are never chosen. `MarianTokenizer` reads both
SentencePiece models and a vocabulary file per side (`separate_vocabs`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from translator.config import ModelConfig, from_dict
from translator.data.tokenizer import BOS, EOS, PAD, load_tokenizer
from translator.errors import UserError
from translator.inference.search import NEVER_OUTPUT
from translator.model.checkpoint import load as load_checkpoint

NOT_A_PIECE = -1e4  # final_logits_bias of output rows that are no target piece
METADATA = "translator.json"
ARCHITECTURES = {"post": "marian", "pre": "pegasus"}


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
    if reads:
        return [
            Entry(f"{theirs}.weight", f"{ours}.weight", 1, part),
            Entry(f"{theirs}.bias", f"{ours}.bias", None, part),
        ]
    return [
        Entry(f"{theirs}.weight", f"{ours}.weight", 0, part),
        Entry(f"{theirs}.bias", f"{ours}.bias", 0, part),
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


SPECIAL = 4  # <pad>, <unk>, <s>, </s>: ids 0…3 of both our vocabularies


@dataclass(frozen=True)
class Vocabularies:
    """Where each side's pieces sit among their rows. Marian: both from 0, in matrices of
    one size. Pegasus (one matrix): the target's pieces from 0, the source's after them, and
    the special ids 0…3 shared by both sides, as MarianTokenizer has one set of special ids
    (a side's own special rows would make `skip_special_tokens` miss the other's). Each
    shared row holds what is read there: the source's <pad>, <unk> and </s> (the encoder
    reads them; the decoder never reads those three, as it never writes <pad> or <unk> and
    stops at </s>) and the target's <s> (the decoder's first input). The four special
    embeddings left over are parked in rows of their own at the end, never read and never
    written (−1e4 bias), so that `import-hf` gives them back and a round trip is exact."""

    src: int
    tgt: int
    architecture: str

    @property
    def size(self) -> int:
        if self.architecture == "pegasus":
            return self.tgt + self.src  # (src − 4) pieces + 4 parked rows
        return max(self.src, self.tgt)

    def src_rows(self) -> torch.Tensor:
        """Their row of each of our source ids."""
        if self.architecture != "pegasus":
            return torch.arange(self.src)
        return torch.cat([torch.arange(SPECIAL), self.tgt + torch.arange(self.src - SPECIAL)])

    def parked(self) -> dict[str, dict[int, int]]:
        """Pegasus: our special ids whose embeddings are parked, and their rows."""
        if self.architecture != "pegasus":
            return {}
        first = self.tgt + self.src - SPECIAL
        return {"tgt": {PAD: first, 1: first + 1, EOS: first + 2}, "src": {BOS: first + 3}}


def to_hf_state(
    model_cfg: ModelConfig, weights: dict[str, torch.Tensor], vocab: Vocabularies
) -> dict[str, torch.Tensor]:
    """Their state dict (model and lm_head, positions left to them) for our `weights`."""
    order = hidden_order(model_cfg.d_model)
    state = {e.theirs: _theirs_of(weights[e.ours], e, order) for e in layer_entries(model_cfg)}

    def rows(tensor: torch.Tensor, at: int, size: int = vocab.size) -> torch.Tensor:
        out = tensor.new_zeros(size, *tensor.shape[1:])
        out[at : at + len(tensor)] = tensor
        return out

    src = weights["src_embed.tokens.weight"][:, order]
    tgt = weights["tgt_embed.tokens.weight"][:, order]
    if vocab.architecture == "pegasus":  # one matrix, which both stacks read
        shared = rows(tgt, 0)
        shared[vocab.src_rows()] = src
        shared[BOS] = tgt[BOS]
        for side, matrix in (("tgt", tgt), ("src", src)):
            for ours, row in vocab.parked()[side].items():
                shared[row] = matrix[ours]
        embeddings = {"model.shared": shared, "model.encoder.embed_tokens": shared}
        embeddings["model.decoder.embed_tokens"] = shared
    else:
        embeddings = {"model.encoder.embed_tokens": rows(src, 0)}
        embeddings["model.decoder.embed_tokens"] = rows(tgt, 0)
    state |= {f"{name}.weight": matrix for name, matrix in embeddings.items()}
    if model_cfg.tie_embeddings and vocab.architecture == "marian":  # lm_head: that matrix
        state["lm_head.weight"] = embeddings["model.decoder.embed_tokens"]
    else:  # Pegasus' shared rows 0…3 are partly the source's: its lm_head is stored apart
        project = tgt if model_cfg.tie_embeddings else weights["project.weight"][:, order]
        state["lm_head.weight"] = rows(project, 0)
    bias = torch.full((1, vocab.size), NOT_A_PIECE)
    bias[0, : vocab.tgt] = weights.get("project.bias", torch.zeros(vocab.tgt))
    state["final_logits_bias"] = bias
    return state


def hf_config(model_cfg: ModelConfig, vocab: Vocabularies, transformers) -> Any:
    """Their model config for ours."""
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
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        tie_word_embeddings=model_cfg.tie_embeddings and vocab.architecture == "marian",
        is_encoder_decoder=True,
    )
    if vocab.architecture == "pegasus":
        return transformers.PegasusConfig(**common)
    return transformers.MarianConfig(
        **common, decoder_vocab_size=vocab.size, share_encoder_decoder_embeddings=False
    )


def _model_class(architecture: str, transformers):
    if architecture == "pegasus":
        return transformers.PegasusForConditionalGeneration
    return transformers.MarianMTModel


def _tokenizer_files(out: Path, tokenizers: dict[str, Any], models: dict, vocab: Vocabularies):
    """Both SentencePiece models and a vocabulary file per side, for MarianTokenizer."""
    (out / "source.spm").write_bytes(models["src"])
    (out / "target.spm").write_bytes(models["tgt"])
    for name, side, rows in (
        ("vocab.json", "src", vocab.src_rows().tolist()),
        ("target_vocab.json", "tgt", range(vocab.tgt)),
    ):
        tok = tokenizers[side]
        pieces = {tok.id_to_piece(i): rows[i] for i in range(tok.get_piece_size())}
        (out / name).write_text(
            json.dumps(pieces, ensure_ascii=False, indent=0) + "\n", encoding="utf-8"
        )
    settings = {
        "tokenizer_class": "MarianTokenizer",
        "separate_vocabs": True,
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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_hf(checkpoint: Path, out: Path, force: bool = False) -> tuple[Path, str]:
    """Write the transformers directory `out` for `checkpoint`; returns it and the
    architecture ("marian" or "pegasus")."""
    transformers = require_transformers()
    if out.exists() and not force:
        raise UserError(f"{out} exists; pass --force to replace it")
    payload = load_checkpoint(checkpoint)
    config = from_dict(payload["config"])
    model_cfg = config.model
    architecture = ARCHITECTURES[model_cfg.norm]
    models = payload["tokenizer_models"]
    tokenizers = {side: load_tokenizer(models[side]) for side in ("src", "tgt")}
    vocab = Vocabularies(
        tokenizers["src"].get_piece_size(), tokenizers["tgt"].get_piece_size(), architecture
    )
    weights = {name: t.detach().float().cpu() for name, t in payload["model"].items()}
    model = _model_class(architecture, transformers)(hf_config(model_cfg, vocab, transformers))
    _load_into(model, to_hf_state(model_cfg, weights, vocab))
    model.generation_config = transformers.GenerationConfig(
        decoder_start_token_id=BOS,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
        suppress_tokens=list(NEVER_OUTPUT),
        num_beams=1,
        do_sample=False,
        max_length=model_cfg.max_positions,
    )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    _tokenizer_files(out, tokenizers, models, vocab)
    metadata = {
        "checkpoint": str(checkpoint),
        "sha256": _sha256(checkpoint),
        "architecture": architecture,
        "vocabularies": asdict(vocab),
        "parked": vocab.parked(),
        "config": payload["config"],
    }
    (out / METADATA).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    return out, architecture


def _load_into(model, state: dict[str, torch.Tensor]) -> None:
    """Their model holding `state`: every tensor of it given (tied ones alike) but the
    position tables they compute."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    left = [k for k in missing if "embed_positions" not in k]
    if left or unexpected:
        raise UserError(f"the weights do not fit {type(model).__name__}: {left or unexpected}")


# ---- transformers directory → our checkpoint (`translator import-hf`) ----

HUB_HINT = "huggingface-cli download {name} --local-dir DIR"
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
            f"model first ({HUB_HINT.format(name=directory)}) and pass DIR"
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


def _side(vocab: dict[str, int], specials: dict[str, int], keep) -> Side:
    """Our specials first (ids 0…3, each from the row `specials` names), then their pieces
    that `keep` accepts, in their order."""
    rest = sorted(
        (row, piece) for piece, row in vocab.items() if piece not in SPECIALS and keep(piece)
    )
    return Side(
        [*SPECIALS, *(piece for _, piece in rest)],
        [specials[name] for name in SPECIALS] + [row for row, _ in rest],
    )


def _our_tokenizer(model: bytes, side: Side) -> bytes:
    """Their SentencePiece model with its pieces in our order: the same pieces, scores and
    kinds (so it segments text as theirs does), pieces it lacks as unused ones (never
    produced, but the model may read or write them), and our special ids."""
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


def _read_vocabularies(directory: Path, hf: dict) -> tuple[Side, Side, dict[str, bytes]]:
    """Each side's pieces and rows from MarianTokenizer's files, and our two tokenizers."""
    files = {name: directory / name for name in ("source.spm", "target.spm", "vocab.json")}
    absent = [name for name, path in files.items() if not path.is_file()]
    if absent:
        raise UserError(f"{directory} lacks {', '.join(absent)}: import-hf reads Marian tokenizers")
    settings_file = directory / "tokenizer_config.json"
    settings = (
        json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    )
    src_vocab = json.loads(files["vocab.json"].read_text(encoding="utf-8"))
    tgt_vocab = src_vocab
    if settings.get("separate_vocabs"):
        tgt_vocab = json.loads((directory / "target_vocab.json").read_text(encoding="utf-8"))
    pad = hf.get("pad_token_id", src_vocab.get("<pad>"))
    named = lambda vocab, fallback: {  # noqa: E731
        name: vocab.get(name, fallback.get(name, pad)) for name in SPECIALS
    }
    source_spm = files["source.spm"].read_bytes()
    source_pieces = _spm_pieces(source_spm)
    # the source keeps the pieces its tokenizer can produce and the language tokens (>>xx<<)
    src = _side(
        src_vocab,
        named(src_vocab, {"<pad>": pad}),
        lambda p: p in source_pieces or (p.startswith(">>") and p.endswith("<<")),
    )
    start = hf.get("decoder_start_token_id", pad)
    tgt = _side(tgt_vocab, named(tgt_vocab, {"<pad>": pad}) | {"<s>": start}, lambda p: True)
    models = {
        "src": _our_tokenizer(source_spm, src),
        "tgt": _our_tokenizer((directory / "target.spm").read_bytes(), tgt),
    }
    return src, tgt, models


def _spm_pieces(model: bytes) -> set[str]:
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    return {p.piece for p in proto.pieces}


def from_hf_state(
    model_cfg: ModelConfig,
    theirs: dict[str, torch.Tensor],
    src: Side,
    tgt: Side,
    parked: dict[str, dict] | None = None,
) -> dict[str, torch.Tensor]:
    """Our state dict for theirs (the inverse of `to_hf_state`, rows as the sides say, and
    `parked` special embeddings, as our Pegasus export records them, from their rows)."""
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
    state["project.weight"] = pick(theirs["lm_head.weight"], tgt, "")
    if model_cfg.output_bias:
        state["project.bias"] = theirs["final_logits_bias"][0, torch.tensor(tgt.rows)]
    return {name: t.contiguous().clone() for name, t in state.items()}


def import_hf(
    directory: Path, out: Path, target_token: str | None = None, force: bool = False
) -> Imported:
    """Write our checkpoint `out` for the transformers directory `directory`."""
    from translator.config import Config

    transformers = require_transformers()
    hf = _their_directory(directory)
    model_cfg = our_model_config(hf)
    if out.exists() and not force:
        raise UserError(f"{out} exists; pass --force to replace it")
    src, tgt, models = _read_vocabularies(directory, hf)
    if target_token is not None and target_token not in src.pieces:
        raise UserError(f"--target-token {target_token!r} is not in {directory}/vocab.json")
    model = _model_class(hf["model_type"], transformers).from_pretrained(
        directory, local_files_only=True
    )
    theirs = {name: t.detach().float() for name, t in model.state_dict().items()}
    ours = _our_export(directory)  # our own export: its tying and parked rows, as recorded
    rows = torch.tensor(tgt.rows)
    bias = theirs.get("final_logits_bias", torch.zeros(1, 1))[0]
    decoder = theirs.get("model.decoder.embed_tokens.weight", theirs.get("model.shared.weight"))
    tied = torch.equal(theirs["lm_head.weight"][rows], decoder[rows])
    model_cfg = dataclasses.replace(
        model_cfg,
        tie_embeddings=bool(ours["config"]["model"]["tie_embeddings"] if ours else tied),
        output_bias=bool(bias[rows].ne(0).any()) if len(bias) > 1 else False,
    )
    config = Config()
    config.model = model_cfg
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
        "config": asdict(config),
        "tokenizers": {"src": "source.spm", "tgt": "target.spm"},
        "tokenizer_models": models,
        "model": weights,
        "imported": origin,
    }
    from translator.model.checkpoint import save

    save(payload, out)
    return Imported(out, hf["model_type"], (len(src.pieces), len(tgt.pieces)), origin)


def _our_export(directory: Path) -> dict | None:
    """translator.json of a directory `export --format hf` wrote, else None."""
    path = directory / METADATA
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


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
