from conftest import tiny_config

from translator.data.layout import tokenizer_file
from translator.data.prepare import prepare
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
