"""Hugging Face in and out. `translator export --format hf`: a directory transformers
loads offline (written by their save_pretrained, read by their from_pretrained) whose
model is ours (logits within 1e-4, the same greedy ids as `generate(num_beams=1)`) for
pre- and post-norm, tied and untied, a source vocabulary smaller or larger than the
target's; MarianTokenizer gives our ids; `ct2-transformers-converter` converts both shapes
into models that translate as ours do. `translator import-hf`: ours → theirs → ours is
bit-identical; an OPUS-MT-shaped Marian decodes alike here, through its CTranslate2 export
and in transformers. Skipped only when transformers is absent (CI installs the hf
extra)."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
import torch
from conftest import (
    assert_one_line_error,
    ct2_translator,
    generated_pairs,
    run_cli,
    run_script,
)

from translator.config import DecodeConfig
from translator.data.tokenizer import BOS, EOS, PAD, load_tokenizer
from translator.deploy.hf import Vocabularies, export_hf, hidden_order, import_hf
from translator.errors import UserError
from translator.inference.text import Translator
from translator.model import checkpoint as checkpoint_module
from translator.model.transformer import Transformer
from translator.training.resume import ARCHITECTURE

transformers = pytest.importorskip("transformers")

SENTENCES = [en for en, _ in generated_pairs(300, seed=7)[:40]] + ["Tom?", "Mary draws."]
SHAPES = {
    "pre-tied": {},
    "pre-untied": {"tie_embeddings": False},
    "post-tied": {"norm": "post"},
    "post-untied": {"norm": "post", "tie_embeddings": False, "decoder_layers": 2},
    "post-zero-start": {"norm": "post", "zero_start": True},
}


def random_checkpoint(trained, path, swap_vocabularies=False, **model_changes):
    """The trained checkpoint's tokenizers (swapped: the source's larger than the
    target's) around a model of another shape with every weight random, layer norms and
    biases included, so that a wrong permutation of any tensor shows."""
    payload = checkpoint_module.load(trained)
    payload["config"]["model"].update(model_changes)
    models = payload["tokenizer_models"]
    if swap_vocabularies:
        payload["tokenizer_models"] = {"src": models["tgt"], "tgt": models["src"]}
    translator = Translator.from_checkpoint(trained, torch.device("cpu"))
    sizes = [translator.src_tok.get_piece_size(), translator.tgt_tok.get_piece_size()]
    torch.manual_seed(2)
    model = Transformer(
        dataclasses.replace(translator.engine.config.model, **model_changes),
        *(sizes[::-1] if swap_vocabularies else sizes),
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.2)
    payload["model"] = model.state_dict()
    checkpoint_module.save(payload, path)
    return path, model.eval()


def vocabulary(checkpoint) -> Vocabularies:
    """Their rows of our ids, as the export lays them out."""
    models = checkpoint_module.load(checkpoint)["tokenizer_models"]
    sides = [load_tokenizer(models[side]) for side in ("src", "tgt")]
    return Vocabularies.of(*([t.id_to_piece(i) for i in range(t.get_piece_size())] for t in sides))


def their_rows(directory, tokenizer) -> torch.Tensor:
    """Their row of each of our source ids, from the export's vocab.json."""
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    return torch.tensor([vocab[tokenizer.id_to_piece(i)] for i in range(len(tokenizer))])


def test_the_hidden_order_puts_sines_first_as_theirs_do():
    from translator.model.transformer import sinusoids

    ours = sinusoids(50, 16)
    theirs = transformers.MarianMTModel(
        transformers.MarianConfig(
            d_model=16,
            max_position_embeddings=50,
            vocab_size=10,
            pad_token_id=0,
            decoder_start_token_id=0,
        )
    ).model.encoder.embed_positions.weight
    assert torch.allclose(ours[:, hidden_order(16)], theirs, atol=1e-6)


@pytest.mark.parametrize("swap", [False, True], ids=["src-smaller", "src-larger"])
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_exported_logits_and_greedy_ids_are_ours(trained, tmp_path, shape, swap):
    path, model = random_checkpoint(trained, tmp_path / "random.pt", swap, **shape)
    out, architecture, caveat = export_hf(path, tmp_path / "hf")
    assert architecture == ("pegasus" if shape.get("norm", "pre") == "pre" else "marian")
    assert bool(caveat) == (architecture == "marian" and not shape.get("zero_start"))
    metadata = json.loads((out / "translator.json").read_text())
    assert metadata["architecture"] == architecture
    vocab = vocabulary(path)
    rows, tgt_rows = torch.tensor(vocab.src), torch.tensor(vocab.tgt)
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    vt = model.project.out_features
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, model.src_embed.tokens.num_embeddings, (4, 9), generator=generator)
    src[:, -1] = EOS
    tgt = torch.randint(4, vt, (4, 7), generator=generator)
    tgt[:, 0] = BOS
    with torch.no_grad():
        ours = model(src, tgt, torch.ones(4, 1, 1, 9, dtype=torch.bool))
        got = theirs(input_ids=rows[src], decoder_input_ids=tgt_rows[tgt]).logits
    written = [i for i in range(vt) if i not in (PAD, 1, BOS)]  # the rest: never chosen
    assert (got[..., tgt_rows[written]] - ours[..., written]).abs().max() <= 1e-4
    others = torch.ones(vocab.size, dtype=torch.bool)
    others[tgt_rows[written]] = False
    assert (got[..., others] < -1e3).all()

    decode = DecodeConfig(precision="fp32", batch_size=8, max_len_a=0.0, max_len_b=24)
    engine = Translator.from_checkpoint(path, torch.device("cpu"), decode)
    sources = [torch.tensor(s) for s in engine.encode(SENTENCES[:4])]
    expected = engine.search([s.numpy() for s in sources])
    assert any(len(ids) == 24 for ids in expected)  # random weights run to the limit
    assert _generate(theirs, sources, vocab, 24) == expected


def _generate(model, sources: list, vocab: Vocabularies, limit: int) -> list:
    """Greedy ids from transformers (no start token, no EOS, no padding) as our target ids,
    one sentence at a time, at most `limit` new tokens as our decoding allows."""
    ours = {row: i for i, row in enumerate(vocab.tgt)}
    rows = torch.tensor(vocab.src)
    outputs = []
    for ids in sources:
        with torch.no_grad():
            out = model.generate(rows[ids[None]], num_beams=1, max_new_tokens=limit)
        outputs.append([ours[t] for t in out[0, 1:].tolist() if ours[t] not in (EOS, BOS)])
    return outputs


def test_the_export_translates_through_their_pipeline_and_tokenizer(trained, tmp_path):
    out, architecture, caveat = export_hf(trained, tmp_path / "hf")
    assert (architecture, caveat) == ("pegasus", "")  # the tiny model is pre-norm
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors"} <= names
    assert {"source.spm", "target.spm", "vocab.json", "target_vocab.json"} <= names
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert type(tokenizer).__name__ == "MarianTokenizer"
    decode = DecodeConfig(
        precision="fp32", batch_size=16, recase=False, final_mark=False, max_len_a=0, max_len_b=63
    )
    engine = Translator.from_checkpoint(trained, torch.device("cpu"), decode)  # limits alike
    rows = their_rows(out, engine.src_tok)
    for sentence, ids in zip(SENTENCES, engine.encode(SENTENCES), strict=True):
        assert tokenizer(sentence)["input_ids"] == rows[ids].tolist()
    vocab = vocabulary(trained)  # one vocabulary: the target's pieces by the same file
    assert their_rows(out, engine.tgt_tok)[4:].tolist() == list(vocab.tgt[4:])
    text = "我会买书。🔥"  # 🔥 in byte-fallback pieces, which the source's model cannot read
    pieces = engine.tgt_tok.encode(text)
    assert "<0xF0>" in [engine.tgt_tok.id_to_piece(i) for i in pieces]
    written = torch.tensor(vocab.tgt)[torch.tensor([[BOS, *pieces, EOS, PAD, PAD]])]
    assert tokenizer.batch_decode(written, skip_special_tokens=True) == [text]
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out)
    batch = tokenizer(SENTENCES[:10], return_tensors="pt", padding=True)
    got = tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True)
    assert got == engine.translate(SENTENCES[:10])
    assert sum(bool(t) for t in got) == 10
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["decoder_start_token_id"] == vocab.tgt[BOS] == vocab.row("<pad>")
    assert generation.get("num_beams", 1) == 1
    metadata = json.loads((out / "translator.json").read_text())
    assert metadata["checkpoint"] == str(trained) and len(metadata["sha256"]) == 64


def test_export_and_import_from_the_cli_and_their_errors(trained, tmp_path):
    """The CLI round trip, `info` on the import, and each error in one line (the checks
    that need no CLI process are made in this one, which is slow to start)."""
    run_dir = trained.parent.parent
    done = run_cli("export", str(run_dir), "--format", "hf", "--out", "hf", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "transformers, pegasus" in done.stdout and (tmp_path / "hf/config.json").is_file()
    back = run_cli("import-hf", "hf", "--out", "ours.pt", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    info = run_cli("info", "ours.pt", cwd=tmp_path)
    assert "imported from" in info.stdout and "licence: not stated" in info.stdout
    int8 = run_cli("export", str(run_dir), "--format", "hf", "--quantization", "int8",
                   "--out", "x", cwd=tmp_path)  # fmt: skip
    assert_one_line_error(int8, "--quantization is for --format ct2")
    hub = run_cli("import-hf", "Helsinki-NLP/opus-mt-en-zh", "--out", "x.pt", cwd=tmp_path)
    assert_one_line_error(hub, "not a local directory", "huggingface-cli download")
    with pytest.raises(UserError, match="exists; pass --force"):
        export_hf(trained, tmp_path / "hf")
    with pytest.raises(UserError, match="'>>fr<<' is not in"):
        import_hf(tmp_path / "hf", tmp_path / "x.pt", target_token=">>fr<<")
    bart = tmp_path / "bart"
    transformers.BartForConditionalGeneration(
        transformers.BartConfig(vocab_size=20, d_model=16, encoder_layers=1, decoder_layers=1)
    ).save_pretrained(bart)
    with pytest.raises(UserError, match="model_type 'bart' does not fit"):
        import_hf(bart, tmp_path / "x.pt")


CONVERTED = {"pegasus": {}, "marian": {"norm": "post", "zero_start": True}, "opus-mt": None}


@pytest.mark.parametrize("shape", CONVERTED.values(), ids=CONVERTED.keys())
def test_ct2_transformers_converter_converts_the_export_into_our_translations(
    trained, tmp_path, monkeypatch, shape
):
    """Their converter, unmodified, run as its command runs (its `main`, here, which saves
    importing transformers again in a process of its own) on the export of a random model
    of each shape, and of an OPUS-MT-shaped one imported (its start row zero, as theirs);
    the converted model, given what the export's tokenizer makes of each sentence, writes
    our greedy ids, and with a beam, what our own CTranslate2 export writes with the same
    length penalty."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from translator.deploy.export import export

    prefix = ""
    if shape is None:
        directory, _, _ = opus_shaped(tmp_path, zero_start=True)
        path = import_hf(directory, tmp_path / "opus.pt", target_token=">>cmn_Hans<<").path
        assert checkpoint_module.load(path)["config"]["model"]["zero_start"] is True
        prefix = ">>cmn_Hans<< "  # what our engine puts before each source, they are given
    else:
        path, _ = random_checkpoint(trained, tmp_path / "random.pt", **shape)
    out, architecture, caveat = export_hf(path, tmp_path / "hf")
    assert caveat == ""
    from ctranslate2.converters import transformers as converter

    command = ["ct2-transformers-converter", "--model", str(out), "--output_dir"]
    monkeypatch.setattr(sys, "argv", [*command, str(tmp_path / "ct2")])
    converter.main()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    sources = [
        tokenizer.convert_ids_to_tokens(tokenizer(prefix + s)["input_ids"]) for s in SENTENCES
    ]
    converted = ctranslate2.Translator(str(tmp_path / "ct2"), intra_threads=1)
    decode = DecodeConfig(precision="fp32", batch_size=8, max_len_a=0.0, max_len_b=24)
    engine = Translator.from_checkpoint(path, torch.device("cpu"), decode)
    ids = engine.encode(SENTENCES)
    rows = vocabulary(path).src
    assert [tokenizer.convert_tokens_to_ids(s) for s in sources] == [
        [rows[i] for i in s] for s in ids
    ]

    def theirs(beam: int) -> list[list[int]]:
        results = converted.translate_batch(
            sources,
            beam_size=beam,
            length_penalty=decode.length_penalty,
            max_decoding_length=24,
            min_decoding_length=0,  # as ours: an empty translation may win
        )
        return [engine.tgt_tok.piece_to_id(r.hypotheses[0]) for r in results]

    expected = engine.search(ids)
    assert any(len(out) == 24 for out in expected)  # random weights run to the limit
    assert theirs(1) == expected
    ours = ct2_translator(export(path, tmp_path / "ours.ct2"), decode)
    assert theirs(4) == ours.with_decode(beam=4).search(ids)


# ---- import-hf ----


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_ours_to_theirs_to_ours_is_bit_identical(trained, tmp_path, shape):
    """Bit for bit, but for a zero-start model's <s> embedding, which nothing reads and
    which comes back zero."""
    path, model = random_checkpoint(trained, tmp_path / "random.pt", **shape)
    out, _, _ = export_hf(path, tmp_path / "hf")
    imported = import_hf(out, tmp_path / "back.pt").path
    before, after = checkpoint_module.load(path), checkpoint_module.load(imported)
    weights = after["model"]
    assert set(weights) == set(before["model"])
    for name, tensor in before["model"].items():
        if shape.get("zero_start") and name in ("tgt_embed.tokens.weight", "project.weight"):
            assert not weights[name][BOS].any()
            tensor = torch.cat(
                [tensor[:BOS], torch.zeros_like(tensor[BOS : BOS + 1]), tensor[BOS + 1 :]]
            )
        assert torch.equal(weights[name], tensor), name
    got = after["config"]["model"]
    for key in ("encoder_layers", "decoder_layers", "d_model", "heads", "ff_dim", "norm"):
        assert got[key] == before["config"]["model"][key], key
    assert got["tie_embeddings"] == model.model_cfg.tie_embeddings
    assert (got["activation"], got["output_bias"]) == ("relu", False)
    assert got["zero_start"] == model.model_cfg.zero_start
    for side in ("src", "tgt"):  # the same pieces, ids and segmentation
        ours, back = (load_tokenizer(p["tokenizer_models"][side]) for p in (before, after))
        assert [ours.id_to_piece(i) for i in range(ours.get_piece_size())] == [
            back.id_to_piece(i) for i in range(back.get_piece_size())
        ]
        assert ours.encode(SENTENCES) == back.encode(SENTENCES)
    assert after["imported"]["exported_from"] == str(path)


def opus_shaped(tmp_path, seed: int = 0, zero_start: bool = False):
    """A tiny random Marian as OPUS-MT ships them: post-norm, swish, one joint vocabulary
    (</s> 0, <unk> 1, …, language tokens, <pad> last, which starts decoding) read by two
    unigram SentencePiece models, tied embeddings, a trained-looking output bias; with
    `zero_start`, its <pad> row zero, as real OPUS-MT models have it (random otherwise)."""
    import io

    import sentencepiece as spm

    english = [en for en, _ in generated_pairs(300)]
    chinese = [zh for _, zh in generated_pairs(300)]
    models = {}
    for name, lines, size in (("source.spm", english, 40), ("target.spm", chinese, 50)):
        buffer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=buffer,
            model_type="unigram",
            vocab_size=size,
            minloglevel=2,
        )
        models[name] = buffer.getvalue()
    vocab = {"</s>": 0, "<unk>": 1}
    for model in models.values():
        tok = spm.SentencePieceProcessor(model_proto=model)
        for i in range(tok.get_piece_size()):
            if not (tok.is_control(i) or tok.is_unknown(i)):
                vocab.setdefault(tok.id_to_piece(i), len(vocab))
    vocab[">>cmn_Hans<<"], vocab[">>yue_Hant<<"] = len(vocab), len(vocab) + 1
    vocab["<pad>"] = len(vocab)
    directory = tmp_path / "opus-mt-tiny"
    directory.mkdir()
    for name, model in models.items():
        (directory / name).write_bytes(model)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (directory / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": False}))
    (directory / "README.md").write_text("---\nlanguage: [en, zh]\nlicense: apache-2.0\n---\n")
    config = transformers.MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
        activation_function="swish",
        max_position_embeddings=64,
        pad_token_id=vocab["<pad>"],
        eos_token_id=0,
        decoder_start_token_id=vocab["<pad>"],
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" not in name:
                parameter.add_(torch.randn_like(parameter) * 0.2)
        model.final_logits_bias.normal_(0, 1.0)
        model.final_logits_bias[0, vocab["<pad>"]] = -1e9  # as OPUS-MT's: pad never written
        if zero_start:
            model.model.shared.weight[vocab["<pad>"]] = 0
    model.save_pretrained(directory)
    return directory, model, vocab


def test_an_opus_shaped_marian_decodes_alike_here_in_ctranslate2_and_in_transformers(tmp_path):
    directory, theirs, vocab = opus_shaped(tmp_path)
    done = import_hf(directory, tmp_path / "opus.pt", target_token=">>cmn_Hans<<")
    assert done.origin["license"] == "apache-2.0"
    payload = checkpoint_module.load(done.path)
    model_cfg = payload["config"]["model"]
    assert (model_cfg["norm"], model_cfg["activation"], model_cfg["output_bias"]) == (
        "post",
        "swish",
        True,
    )
    assert model_cfg["tie_embeddings"] is True
    decode = DecodeConfig(precision="fp32", batch_size=8, max_len_a=0.0, max_len_b=20, recase=False)
    ours = Translator.from_checkpoint(done.path, torch.device("cpu"), decode)
    sources = ours.encode(SENTENCES[:16])
    prefix = ours.src_tok.piece_to_id(">>cmn_Hans<<")
    assert all(s[0] == prefix for s in sources)
    tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    their_ids = lambda s: [vocab[ours.src_tok.id_to_piece(int(i))] for i in s]  # noqa: E731
    for sentence, ids in zip(SENTENCES[:16], sources, strict=True):
        assert tokenizer(">>cmn_Hans<< " + sentence)["input_ids"] == their_ids(ids)
    their_rows = [
        vocab[ours.tgt_tok.id_to_piece(i)] for i in range(4, ours.tgt_tok.get_piece_size())
    ]
    src, tgt = torch.tensor(sources[0])[None], torch.tensor([[2, 7, 9, 11, 5]])  # BOS first
    with torch.no_grad():
        mine = ours.engine.model(src, tgt, torch.ones(1, 1, 1, src.shape[1], dtype=torch.bool))
        start = torch.tensor([[vocab["<pad>"]]])  # their decoder starts from <pad>
        rows = [vocab[ours.tgt_tok.id_to_piece(i)] for i in tgt[0, 1:].tolist()]
        got = theirs(
            input_ids=torch.tensor([their_ids(sources[0])]),
            decoder_input_ids=torch.cat([start, torch.tensor([rows])], dim=1),
        ).logits
    assert (mine[..., 4:] - got[..., their_rows]).abs().max() <= 1e-4  # every real piece
    expected = ours.search(sources)
    assert any(len(out) == 20 for out in expected)  # random weights run to the limit
    got = []
    for ids in sources:
        out = theirs.generate(
            torch.tensor([their_ids(ids)]),
            num_beams=1,
            do_sample=False,
            max_new_tokens=20,
            suppress_tokens=[vocab["<unk>"], vocab["<pad>"]],
            forced_eos_token_id=None,  # Marian's default forces </s> at the limit; we do not
        )
        pieces = [tokenizer.convert_ids_to_tokens(int(t)) for t in out[0, 1:] if t != 0]
        got.append([ours.tgt_tok.piece_to_id(p) for p in pieces])
    assert got == expected
    ct2 = pytest.importorskip("ctranslate2")
    del ct2
    from translator.deploy.export import export

    exported = export(done.path, tmp_path / "ct2")
    assert ct2_translator(exported, decode).search(sources) == expected


def test_an_imported_opus_model_fine_tunes_with_its_target_token(tmp_path):
    """prepare with its tokenizers and data.src_prefix, train from its weights: the
    batches carry the prefix id first, and one epoch runs."""
    from conftest import tiny_config, write_tatoeba

    from translator.corpus.preparer import prepare
    from translator.data.dataset import load_training_data
    from translator.training.trainer import train

    directory, _, _ = opus_shaped(tmp_path)
    done = import_hf(directory, tmp_path / "opus.pt", target_token=">>cmn_Hans<<")
    imported = checkpoint_module.load(done.path)["config"]["model"]
    write_tatoeba(tmp_path / "corpus.tsv", generated_pairs(200))
    config = tiny_config(
        tmp_path,
        data={"tokenizers_from": str(done.path), "src_prefix": ">>cmn_Hans<<"},
        model={k: imported[k] for k in (*ARCHITECTURE, "max_positions")},
        train={"init_from": str(done.path), "max_epochs": 1},
    )
    prepare(config.data)
    data = load_training_data(config)
    models = checkpoint_module.load(done.path)["tokenizer_models"]
    prefix = load_tokenizer(models["src"]).piece_to_id(">>cmn_Hans<<")
    batch = data.train[0]
    assert (batch.src[:, 0] == prefix).all()
    train(config, progress=False)
    assert (tmp_path / "run/checkpoints/best.pt").is_file()
    relu = dataclasses.replace(
        config,
        model=dataclasses.replace(config.model, activation="relu"),
        train=dataclasses.replace(config.train, run_dir=str(tmp_path / "relu")),
    )
    with pytest.raises(UserError, match="model.activation is 'relu' here and 'swish'"):
        train(relu, progress=False)


def test_an_imported_opus_model_teaches_a_student_and_is_served(tmp_path):
    """`distill --teacher` and `serve --checkpoint` take the imported checkpoint: the
    distilled train targets are its translations (its own tokenizers and prefix, the
    student data's none), and the server answers with them."""
    from conftest import tiny_config, write_tatoeba

    from translator.corpus.preparer import prepare
    from translator.data.layout import read_split
    from translator.distill.distiller import distill

    directory, _, _ = opus_shaped(tmp_path)
    done = import_hf(directory, tmp_path / "opus.pt", target_token=">>cmn_Hans<<")
    write_tatoeba(tmp_path / "corpus.tsv", generated_pairs(120))
    loose = {"min_length_ratio": 0.0, "max_length_ratio": 1e9, "max_chars": 10_000}
    decode = {"beam": 1, "max_len_a": 0.0, "max_len_b": 2, "recase": False, "split": False}
    teaching = {"teacher": str(done.path), "out": str(tmp_path / "distilled"), "beam": 1}
    config = tiny_config(tmp_path, data=loose, decode=decode, distill=teaching)
    prepare(config.data)
    out = distill(config, progress=False)
    made = out.stats["distilled"]
    assert made["held_out_check"] == {"checked": False, "teacher_data": "None"}  # not here
    teacher = Translator.from_checkpoint(done.path, torch.device("cpu"), config.decode)
    en, zh = read_split(tmp_path / "distilled", "train")
    assert made["kept"] == len(en) > 0
    assert zh == teacher.translate(en)

    pytest.importorskip("fastapi")
    pytest.importorskip("granian")
    from test_serve import app_in_thread, post

    from translator.deploy.decoder import LocalDecoder
    from translator.deploy.server import create_app

    # the app `serve` builds around what its decoding process loads (serve_decoder), run
    # in a thread: a spawned decoding process would add ten seconds to the suite
    decoder = LocalDecoder(Translator.open(config, done.path))
    app = create_app(decoder, config.decode, config.serve, {"model": str(done.path)})
    with app_in_thread(app) as url:
        status, body = post(url, {"text": SENTENCES[:4]})
    assert status == 200, body
    assert body["translations"] == teacher.translate(SENTENCES[:4])


def test_the_parity_script_finds_every_sentence_identical(trained):
    data = trained.parents[2] / "prepared"
    done = run_script(
        "export_parity.py",
        "hf",
        str(trained),
        "--data",
        str(data),
        "--batch",
        "8",
        cwd=trained.parent,
    )
    assert done.returncode == 0, done.stderr
    sentences = done.stdout.split("pegasus, ")[1].split(" sentences")[0]
    assert "differs" not in done.stdout and "ours ÷ transformers: " in done.stdout
    for engine in ("transformers generate, greedy", "ct2-transformers-converter"):
        assert f"{engine}" in done.stdout
    assert done.stdout.count(f"| {sentences} of {sentences} |") == 3  # and the beam


def test_the_onnx_script_refuses_a_pre_norm_checkpoint_before_installing_anything(
    trained, tmp_path
):
    """optimum-onnx needs transformers 4, which ties a Pegasus export's two embeddings: the
    script says so in one line, before it makes its environment."""
    data = trained.parents[2] / "prepared"
    env = tmp_path / "optimum-env"
    args = ("onnx", str(trained), "--data", str(data), "--env", str(env))
    done = run_script("export_parity.py", *args, cwd=trained.parent)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "pre-norm" in lines[0]
    assert not env.exists()
