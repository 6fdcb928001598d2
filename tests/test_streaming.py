"""Streaming `prepare` and memory-mapped training data, on small corpora with small blocks
and buckets so that every multi-block, multi-bucket, multi-worker path runs:

- the output is the same, byte for byte, with 1 or 2 workers and any block or bucket size,
  and equals what the plain in-memory pipeline (clean everything, dedupe, split) writes;
- no step holds more lines than a block or a bucket, however large the corpus;
- the ids on disk are the tokenizers' encoding of the split files; training reads them
  memory-mapped, collates a batch only when it is reached, and its batches equal those of
  encoding the text in memory; stale ids are encoded again.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from common import read_pairs
from conftest import tiny_config
from reference import encode_pairs, make_batches, split_pairs

from translator.config import Config
from translator.corpus import split_writer
from translator.corpus.cleaning import clean_chunk, first_occurrences
from translator.corpus.formats import readers
from translator.corpus.formats.readers import ReadStats
from translator.corpus.preparer import prepare
from translator.data import dataset
from translator.data.dataset import load_training_data
from translator.data.ids import ids_file, open_ids, up_to_date
from translator.data.layout import LANGS, SPLITS, read_split
from translator.data.tokenizer import load_tokenizer
from translator.errors import UserError

MAKE_CORPUS = Path(__file__).resolve().parents[1] / "scripts" / "make_corpus.py"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """3,000 rows recombined from the tiny generated corpus, with traditional lines,
    duplicates and malformed rows planted."""
    from conftest import generated_pairs, write_tatoeba

    tmp = tmp_path_factory.mktemp("corpus")
    source = write_tatoeba(tmp / "source.tsv", generated_pairs(576))
    out = tmp / "corpus.tsv"
    rates = ["--traditional", "0.05", "--duplicates", "0.05", "--malformed", "0.01"]
    command = [sys.executable, str(MAKE_CORPUS), "3000", str(out), "--source", str(source)]
    subprocess.run([*command, *rates], check=True, capture_output=True)
    return out


def prepared(tmp: Path, corpus: Path, workers: int, **data) -> Config:
    config = tiny_config(tmp, data={"inputs": [str(corpus)], "workers": workers, **data})
    prepare(config.data)
    return config


def files_of(directory: str) -> dict[str, object]:
    """Every output file's bytes; for a SentencePiece model, its pieces and scores (the file
    also records its own path and thread count), and ids.json without the models' digests."""
    files: dict[str, object] = {}
    for path in sorted(Path(directory).iterdir()):
        if path.suffix == ".model":
            model = load_tokenizer(path)
            pieces = range(model.get_piece_size())
            files[path.name] = [(model.id_to_piece(i), model.get_score(i)) for i in pieces]
        elif path.name == "ids.json":
            files[path.name] = {**json.loads(path.read_text()), "tokenizers": None}
        elif path.is_file():
            files[path.name] = path.read_bytes()
    return files


def test_output_is_the_same_for_any_workers_blocks_and_buckets(tmp_path, corpus, monkeypatch):
    reference = files_of(prepared(tmp_path / "a", corpus, workers=1).data.dir)
    monkeypatch.setattr(readers, "BLOCK_BYTES", 8 << 10)  # about 25 blocks
    monkeypatch.setattr(split_writer, "BUCKET_ROWS", 400)  # 8 buckets
    for workers in (1, 2):
        directory = prepared(tmp_path / f"w{workers}", corpus, workers=workers).data.dir
        assert files_of(directory) == reference
    assert not list(Path(directory).glob(".prepare-*"))  # the work files are gone


def test_splits_equal_the_in_memory_pipeline(tmp_path, corpus, monkeypatch):
    monkeypatch.setattr(readers, "BLOCK_BYTES", 8 << 10)
    monkeypatch.setattr(split_writer, "BUCKET_ROWS", 300)
    config = prepared(tmp_path, corpus, workers=2)
    raw = pd.concat(read_pairs(corpus, "tatoeba", ReadStats()), ignore_index=True)
    cleaned = clean_chunk(raw, config.data)  # the whole corpus as one chunk
    pairs = cleaned.pairs[first_occurrences(cleaned.pair_key)].reset_index(drop=True)
    names = split_pairs(pairs.en, pairs.zh, config.data.valid_size, config.data.test_size, 1)
    for split in SPLITS:
        rows = names.names.index[names.names == split]
        assert read_split(config.data.dir, split) == (
            pairs.en[rows].tolist(),
            pairs.zh[rows].tolist(),
        )


def test_no_step_holds_more_than_a_block_or_a_bucket(tmp_path, corpus, monkeypatch):
    monkeypatch.setattr(readers, "BLOCK_BYTES", 8 << 10)
    monkeypatch.setattr(split_writer, "BUCKET_ROWS", 250)
    largest = {"parsed": 0, "bucketed": 0}
    parse, read = readers.parse_block, split_writer._read

    def counting_parse(*args):
        pairs, stats = parse(*args)
        largest["parsed"] = max(largest["parsed"], len(pairs))
        return pairs, stats

    def counting_read(path):
        lines = read(path)
        if path.name.startswith("bucket-"):
            largest["bucketed"] = max(largest["bucketed"], len(lines))
        return lines

    monkeypatch.setattr("translator.corpus.formats.sources.readers.parse_block", counting_parse)
    monkeypatch.setattr(split_writer, "_read", counting_read)
    prepared(tmp_path, corpus, workers=1)
    lines_per_block = (8 << 10) // min(len(line) for line in corpus.read_bytes().splitlines())
    assert 0 < largest["parsed"] <= lines_per_block < 3000
    assert largest["bucketed"] == 250  # full buckets, never the corpus


def test_ids_are_the_tokenizers_encoding_of_the_split_files(tmp_path, corpus):
    config = prepared(tmp_path, corpus, workers=2)
    directory = config.data.dir
    for lang in LANGS:
        tokenizer = load_tokenizer(Path(directory) / f"spm.{lang}.model")
        for split in SPLITS:
            ids = open_ids(directory, split, lang)
            lines = read_split(directory, split)[LANGS.index(lang)]
            assert isinstance(ids.tokens, np.memmap) or len(ids.tokens) == 0
            assert ids.tokens.dtype == np.uint16 and len(ids) == len(lines)
            for i in (0, len(lines) // 2, len(lines) - 1):
                expected = tokenizer.encode(lines[i])
                assert ids.tokens[ids.offsets[i] : ids.offsets[i + 1]].tolist() == expected


def test_training_batches_are_lazy_and_equal_encoding_in_memory(tmp_path, corpus, monkeypatch):
    config = prepared(tmp_path, corpus, workers=1)
    collated = []
    collate = dataset.collate_padded
    monkeypatch.setattr(dataset, "collate_padded", lambda *a: collated.append(1) or collate(*a))
    data = load_training_data(config)
    assert isinstance(data.train.src.tokens, np.memmap) and not collated
    src_tok, tgt_tok = (load_tokenizer(Path(config.data.dir) / f"spm.{x}.model") for x in LANGS)
    for split, batches in (("train", data.train), ("valid", data.valid)):
        src, tgt, _ = encode_pairs(
            *read_split(config.data.dir, split), src_tok, tgt_tok, config.model.max_positions
        )
        eager = make_batches(src, tgt, config.train.max_tokens)
        assert len(eager) == len(batches) > 1
        for i in (0, len(eager) // 2, len(eager) - 1):
            batch = batches[i]
            for name in ("src", "tgt_in", "tgt_out", "src_mask"):
                assert torch.equal(getattr(batch, name), getattr(eager[i], name))
            assert batch.n_tokens == eager[i].n_tokens == batches.tokens[i]
    assert len(collated) == 6  # only the batches looked at


def test_stale_or_missing_ids_are_encoded_again(tmp_path, corpus):
    config = prepared(tmp_path, corpus, workers=1)
    directory = Path(config.data.dir)
    assert up_to_date(directory)
    ids_file(directory, "train", "en").unlink()
    assert not up_to_date(directory)
    load_training_data(config)
    assert up_to_date(directory)
    other = prepared(tmp_path / "other", corpus, workers=1, src_vocab_size=80)
    for suffix in ("model", "vocab"):  # tokenizers replaced by hand
        source = Path(other.data.dir) / f"spm.en.{suffix}"
        (directory / f"spm.en.{suffix}").write_bytes(source.read_bytes())
    assert not up_to_date(directory)
    data = load_training_data(config)
    assert up_to_date(directory)
    replaced = load_tokenizer(directory / "spm.en.model")
    first = read_split(directory, "train")[0][0]
    ids = data.train.src
    assert ids.tokens[ids.offsets[0] : ids.offsets[1]].tolist() == replaced.encode(first)


def test_an_interrupted_prepare_is_not_trained_on(tmp_path, corpus):
    config = prepared(tmp_path, corpus, workers=1)
    (Path(config.data.dir) / "stats.json").unlink()  # what a kill before the end leaves
    with pytest.raises(UserError, match="did not finish"):
        load_training_data(config)
    (Path(config.data.dir) / ".prepare-x").mkdir()  # a kill leaves its work files too
    prepare(config.data)
    assert not list(Path(config.data.dir).glob(".prepare-*"))
    assert load_training_data(config).train_pairs > 0
