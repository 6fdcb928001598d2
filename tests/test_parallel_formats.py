"""The standard parallel formats: two line-aligned files (Moses), TMX, and zip archives of
them. Each gives exactly the prepared data the Tatoeba TSV of the same pairs gives; a
broken file is one error line and no stats.json."""

import gzip
import zipfile
from dataclasses import replace
from xml.sax.saxutils import escape

import pytest
from conftest import generated_pairs, tiny_config, write_tatoeba

from translator.corpus.formats import moses, readers, tmx
from translator.corpus.preparer import prepare
from translator.data.layout import split_file, stats_file
from translator.errors import UserError

PAIRS = generated_pairs(600)


def write_moses(directory, pairs, name="news"):
    en, zh = directory / f"{name}.en", directory / f"{name}.zh"
    en.write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    zh.write_text("".join(z + "\n" for _, z in pairs), encoding="utf-8")
    return en, zh


def write_tmx(path, pairs, en_lang="en", zh_lang="zh-CN", encoding="utf-8"):
    units = "".join(
        f'<tu tuid="{i}"><tuv xml:lang="{en_lang}"><seg>{escape(e)}</seg></tuv>'
        f'<tuv xml:lang="{zh_lang}"><seg>{escape(z)}</seg></tuv></tu>\n'
        for i, (e, z) in enumerate(pairs)
    )
    text = (
        f'<?xml version="1.0" encoding="{encoding}"?>\n<tmx version="1.4"><header '
        f'srclang="en" datatype="plaintext" segtype="sentence" adminlang="en" '
        f'o-tmf="x" creationtool="test" creationtoolversion="1"/>\n<body>\n{units}</body></tmx>\n'
    )
    path.write_bytes(text.encode(encoding))
    return path


def prepared(tmp_path, inputs, name):
    config = tiny_config(tmp_path).data
    result = prepare(replace(config, inputs=inputs, dir=str(tmp_path / name)))
    files = {
        f"{s}.{lang}": split_file(result.dir, s, lang).read_text()
        for s in ("train", "valid", "test")
        for lang in ("en", "zh")
    }
    return result.stats, files


@pytest.fixture
def reference(tmp_path):
    """The prepared files of PAIRS given as a Tatoeba TSV."""
    return prepared(tmp_path, [str(write_tatoeba(tmp_path / "c.tsv", PAIRS))], "tsv")[1]


def test_a_moses_pair_prepares_as_the_tsv(tmp_path, reference, monkeypatch):
    monkeypatch.setattr(readers, "BLOCK_BYTES", 1 << 10)  # many blocks, cut mid-way
    en, zh = write_moses(tmp_path, PAIRS)
    stats, files = prepared(tmp_path, [{"src": str(en), "tgt": str(zh)}], "moses")
    assert files == reference
    (corpus,) = stats["inputs"]
    assert corpus["format"] == "moses" and corpus["rows"] == len(PAIRS)
    assert corpus["name"] == f"{en} + {zh}"


def test_line_counts_that_differ_are_one_error_naming_both(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "BLOCK_BYTES", 1 << 10)
    en, zh = write_moses(tmp_path, PAIRS)
    zh.write_text("".join(z + "\n" for _, z in PAIRS[:-7]), encoding="utf-8")
    config = replace(tiny_config(tmp_path).data, inputs=[{"src": str(en), "tgt": str(zh)}])
    n = len(PAIRS)
    with pytest.raises(UserError, match=f"{en} has {n} lines but {zh} has {n - 7}"):
        prepare(config)
    assert not stats_file(config.dir).exists()
    en.write_text("".join(e + "\n" for e, _ in PAIRS[:-1]) + "extra\nlines\n")
    with pytest.raises(UserError, match=f"has {n + 1} lines but .* has {n - 7}"):
        prepare(config)


def test_a_bad_row_on_one_side_is_skipped_and_the_rest_stays_aligned(tmp_path):
    en, zh = write_moses(tmp_path, PAIRS)
    en_lines = en.read_bytes().split(b"\n")
    zh_lines = zh.read_bytes().split(b"\n")
    en_lines[10] = b"caf\xe9 au lait"  # Latin-1, not UTF-8
    zh_lines[20] = "有\x07控制".encode()
    zh_lines[30] = b""  # an empty side
    en.write_bytes(b"\n".join(en_lines))
    zh.write_bytes(b"\r\n".join(zh_lines))  # CRLF on one side only
    stats, files = prepared(tmp_path, [{"src": str(en), "tgt": str(zh)}], "moses")
    assert stats["malformed_by_kind"] == {"undecodable": 1, "control characters": 1}
    assert stats["malformed_examples"][:2] == [
        f"{en}:11: undecodable bytes (not UTF-8)",
        f"{zh}:21: control characters",
    ]
    assert stats["empty"] == 1
    wanted = {e: z for i, (e, z) in enumerate(PAIRS) if i not in (10, 20, 30)}
    for split in ("train", "valid", "test"):
        got = zip(files[f"{split}.en"].splitlines(), files[f"{split}.zh"].splitlines(), strict=True)
        assert all(wanted[e] == z for e, z in got)
    assert sum(len(files[f"{s}.en"].splitlines()) for s in ("train", "valid", "test")) == len(
        wanted
    )


def test_pair_blocks_keep_lines_together_across_block_cuts(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "BLOCK_BYTES", 100)
    pairs = [("a" * (i % 250), "中" * (i % 90)) for i in range(1, 400)]
    en, zh = write_moses(tmp_path, pairs)
    blocks = list(moses.pair_blocks(moses.TextFile(en), moses.TextFile(zh)))
    assert len(blocks) > 10
    got = []
    for block in blocks:
        e, z = block.en.decode().splitlines(), block.zh.decode().splitlines()
        assert len(e) == len(z)
        got += list(zip(e, z, strict=True))
    assert got == pairs


@pytest.mark.parametrize(
    "en_lang,zh_lang",
    [("en", "zh"), ("EN-us", "zh-CN"), ("en_GB", "zh-TW"), ("eng", "cmn"), ("en", "ZH-Hant")],
)
def test_tmx_prepares_as_the_tsv_whatever_the_language_tags(
    tmp_path, reference, monkeypatch, en_lang, zh_lang
):
    monkeypatch.setattr(tmx, "BLOCK_UNITS", 64)
    path = write_tmx(tmp_path / "c.tmx", PAIRS, en_lang, zh_lang)
    stats, files = prepared(tmp_path, [str(path)], "tmx")
    assert files == reference and stats["inputs"][0]["format"] == "tmx"


def test_tmx_in_utf16_with_inline_codes_and_missing_variants(tmp_path):
    path = write_tmx(tmp_path / "c.tmx", PAIRS, encoding="utf-16")
    stats, files = prepared(tmp_path, [str(path)], "tmx16")
    assert stats["pairs"] > 500
    odd = tmp_path / "odd.tmx"
    odd.write_text(
        '<?xml version="1.0"?><tmx version="1.4"><header srclang="en"/><body>'
        '<tu><tuv lang="EN"><seg>Press <bpt i="1">&lt;b&gt;</bpt>Enter<ept i="1">'
        '&lt;/b&gt;</ept> now.</seg></tuv><tuv xml:lang="zh"><seg>现在按<ph>{0}</ph>回车。'
        "</seg></tuv></tu>"
        '<tu><tuv xml:lang="en"><seg>Only English.</seg></tuv>'
        '<tuv xml:lang="fr"><seg>Seulement.</seg></tuv></tu>'
        "</body></tmx>",
        encoding="utf-8",
    )
    block = next(tmx.unit_blocks(odd))
    assert block.en == ["Press Enter now.", "Only English."]
    assert block.zh == ["现在按回车。", None]
    pairs, read = tmx.parse_unit_block("odd.tmx", block)
    assert pairs.to_dict("list") == {"en": ["Press Enter now."], "zh": ["现在按回车。"]}
    assert read.kinds == {"missing en or zh": 1} and str(read.examples[0]).startswith("odd.tmx:2:")


def test_a_cut_off_tmx_is_one_error(tmp_path):
    path = write_tmx(tmp_path / "c.tmx", PAIRS)
    path.write_bytes(path.read_bytes()[:-200])
    config = replace(tiny_config(tmp_path).data, inputs=[str(path)])
    with pytest.raises(UserError, match="not valid TMX .* nothing was prepared"):
        prepare(config)
    assert not stats_file(config.dir).exists()


def test_a_gzipped_tmx_is_read(tmp_path, reference):
    path = tmp_path / "c.tmx.gz"
    path.write_bytes(gzip.compress(write_tmx(tmp_path / "c.tmx", PAIRS).read_bytes(), mtime=0))
    assert prepared(tmp_path, [str(path)], "tmxgz")[1] == reference


def opus_zip(path, en_bytes, zh_bytes):
    """An archive shaped like OPUS's Moses downloads."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README", "News-Commentary v16\n")
        archive.writestr("LICENSE", "CC-BY\n")
        archive.writestr("News-Commentary.en-zh.en", en_bytes)
        archive.writestr("News-Commentary.en-zh.zh", zh_bytes)
        archive.writestr("News-Commentary.en-zh.xml", "<ids/>")
    return path


def test_a_zip_of_a_moses_pair_prepares_as_the_tsv(tmp_path, reference):
    en, zh = write_moses(tmp_path, PAIRS)
    path = opus_zip(tmp_path / "en-zh.txt.zip", en.read_bytes(), zh.read_bytes())
    stats, files = prepared(tmp_path, [str(path)], "zip")
    assert files == reference
    assert stats["inputs"][0]["format"] == "moses"
    assert stats["inputs"][0]["files"] == [
        f"{path}/News-Commentary.en-zh.en",
        f"{path}/News-Commentary.en-zh.zh",
    ]


def test_a_zip_of_one_tsv_or_tmx_is_read(tmp_path, reference):
    tsv = write_tatoeba(tmp_path / "c.tsv", PAIRS)
    tmx_file = write_tmx(tmp_path / "c.tmx", PAIRS)
    for source in (tsv, tmx_file):
        path = tmp_path / f"{source.name}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(source, source.name)
            archive.writestr("README.md", "about")
        assert prepared(tmp_path, [str(path)], f"out-{source.suffix}")[1] == reference


def test_a_damaged_or_unclear_zip_is_one_error(tmp_path):
    en, zh = write_moses(tmp_path, PAIRS)
    good = opus_zip(tmp_path / "good.zip", en.read_bytes(), zh.read_bytes()).read_bytes()
    config = tiny_config(tmp_path).data
    cut = tmp_path / "cut.zip"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(UserError, match="zip archive is truncated or corrupt"):
        prepare(replace(config, inputs=[str(cut)]))
    corrupt = tmp_path / "corrupt.zip"
    data = bytearray(good)
    start = good.index(b"News-Commentary.en-zh.en") + 40  # inside the English member's data
    data[start : start + 64] = bytes(64)
    corrupt.write_bytes(bytes(data))
    with pytest.raises(UserError, match="zip data is corrupt"):
        prepare(replace(config, inputs=[str(corrupt)]))
    unclear = tmp_path / "unclear.zip"
    with zipfile.ZipFile(unclear, "w") as archive:
        archive.writestr("a.tsv", "x")
        archive.writestr("b.tsv", "y")
    with pytest.raises(UserError, match="cannot tell which files .* holds a.tsv, b.tsv"):
        prepare(replace(config, inputs=[str(unclear)]))
    assert not stats_file(config.dir).exists()
