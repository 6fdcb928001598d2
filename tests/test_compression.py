"""Compressed corpora are read directly: gzip, bzip2, xz and Zstandard give the same
prepared data as the plain file, and a truncated or corrupt archive is one error that
leaves nothing behind for `train` to use (no stats.json), never a prefix of the corpus."""

import bz2
import gzip
import lzma
from dataclasses import replace

import pytest
from conftest import generated_pairs, tiny_config, write_tatoeba

from translator.corpus.preparer import prepare
from translator.data.layout import split_file, stats_file
from translator.errors import UserError


def zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor().compress(data)


COMPRESSORS = {
    "gz": lambda data: gzip.compress(data, mtime=0),
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": zstd,
}


@pytest.fixture
def plain(tmp_path):
    return write_tatoeba(tmp_path / "corpus.tsv", generated_pairs(600))


def prepared(tmp_path, path, name):
    config = tiny_config(tmp_path).data
    result = prepare(replace(config, inputs=[str(path)], dir=str(tmp_path / name)))
    files = {
        f"{s}.{lang}": split_file(result.dir, s, lang).read_text()
        for s in ("train", "test")
        for lang in ("en", "zh")
    }
    return result.stats, files


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_a_compressed_corpus_prepares_as_the_plain_file(tmp_path, plain, suffix):
    packed = tmp_path / f"corpus.tsv.{suffix}"
    packed.write_bytes(COMPRESSORS[suffix](plain.read_bytes()))
    stats, files = prepared(tmp_path, packed, "packed")
    plain_stats, plain_files = prepared(tmp_path, plain, "plain")
    assert files == plain_files
    for s in (stats, plain_stats):
        del s["inputs"]  # names the file
    assert stats == plain_stats and stats["pairs"] > 500


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_a_truncated_archive_is_an_error_not_a_shorter_corpus(tmp_path, plain, suffix):
    data = COMPRESSORS[suffix](plain.read_bytes())
    cut = tmp_path / f"cut.tsv.{suffix}"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(UserError, match=f"cut.tsv.{suffix}: the .* data is truncated"):
        prepared(tmp_path, cut, "cut")
    assert not stats_file(tmp_path / "cut").exists()  # train refuses the directory


def test_a_corrupt_archive_is_an_error(tmp_path, plain):
    data = bytearray(gzip.compress(plain.read_bytes(), mtime=0))
    data[len(data) // 2 : len(data) // 2 + 16] = b"\xff" * 16
    bad = tmp_path / "bad.tsv.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(UserError, match="bad.tsv.gz: the gzip data is (corrupt|truncated)"):
        prepared(tmp_path, bad, "bad")
    assert not stats_file(tmp_path / "bad").exists()
