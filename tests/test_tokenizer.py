import logging

from conftest import tiny_config, write_tatoeba

from translator.corpus.preparer import prepare
from translator.data.layout import tokenizer_file
from translator.data.tokenizer import BOS, EOS, PAD, UNK, load_tokenizer


def test_special_ids_and_fullwidth_punctuation_survive(tmp_path, corpus):
    with corpus.open("a", encoding="utf-8") as f:
        f.write("1\tHello, world!\t2\t你好，世界！\n3\tReally?\t4\t真的吗？\n")
    prepare(tiny_config(tmp_path).data)
    zh = load_tokenizer(tokenizer_file(tmp_path / "prepared", "zh"))
    assert (
        [zh.pad_id(), zh.unk_id(), zh.bos_id(), zh.eos_id()] == [PAD, UNK, BOS, EOS] == [0, 1, 2, 3]
    )
    for text in ["你好，世界！", "真的吗？"]:
        ids = zh.encode(text)
        assert UNK not in ids
        assert zh.decode(ids) == text
    en = load_tokenizer(tokenizer_file(tmp_path / "prepared", "en"))
    assert en.decode(en.encode("Hello, world!")) == "Hello, world!"


def test_checkpoint_bytes_load_the_same_model(tmp_path, corpus):
    prepare(tiny_config(tmp_path).data)
    path = tokenizer_file(tmp_path / "prepared", "zh")
    assert load_tokenizer(path.read_bytes()).encode("我会买书。") == load_tokenizer(path).encode(
        "我会买书。"
    )


def test_byte_fallback_makes_every_character_representable(tmp_path, corpus):
    prepare(tiny_config(tmp_path).data)
    zh = load_tokenizer(tokenizer_file(tmp_path / "prepared", "zh"))
    unseen = "他被炒鱿鱼了。𠀀"  # characters the corpus never had, one outside the BMP
    ids = zh.encode(unseen)
    assert UNK not in ids
    assert zh.decode(ids) == unseen


def test_without_byte_fallback_unseen_characters_are_unknown(tmp_path, corpus):
    prepare(tiny_config(tmp_path, data={"byte_fallback": False, "tgt_vocab_size": 60}).data)
    zh = load_tokenizer(tokenizer_file(tmp_path / "prepared", "zh"))
    assert UNK in zh.encode("炒鱿鱼")


def test_a_vocabulary_too_small_for_the_characters_is_raised_with_a_warning(tmp_path, caplog):
    chars = [chr(0x4E00 + i) for i in range(700)]  # 700 distinct characters
    pairs = [(f"Sentence number {i}.", "".join(chars[i : i + 5]) + "。") for i in range(695)]
    write_tatoeba(tmp_path / "corpus.tsv", pairs)
    with caplog.at_level(logging.WARNING, logger="translator"):
        stats = prepare(tiny_config(tmp_path, data={"tgt_vocab_size": 400}).data).stats
    assert stats["vocab_size"]["zh"] > 400 + 256
    assert "data.tgt_vocab_size = 400 is too small" in caplog.text
    assert f"using {stats['vocab_size']['zh']}" in caplog.text
    zh = load_tokenizer(tokenizer_file(tmp_path / "prepared", "zh"))
    assert zh.get_piece_size() == stats["vocab_size"]["zh"]
