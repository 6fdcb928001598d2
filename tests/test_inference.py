import logging

import pytest
import torch
from conftest import tiny_config

from translator.config import DecodeConfig
from translator.corpus.preparer import prepare
from translator.data.layout import tokenizer_file
from translator.data.tokenizer import load_tokenizer
from translator.inference.text import Translator
from translator.inference.torch_engine import TorchEngine
from translator.model.transformer import Transformer


@pytest.fixture
def translator(tmp_path, corpus):
    config = tiny_config(tmp_path, model={"max_positions": 16})
    prepare(config.data)
    src = load_tokenizer(tokenizer_file(config.data.dir, "en"))
    tgt = load_tokenizer(tokenizer_file(config.data.dir, "zh"))
    torch.manual_seed(0)
    model = Transformer(config.model, src.get_piece_size(), tgt.get_piece_size())
    decode = DecodeConfig(batch_size=3, max_len_a=1.0, max_len_b=4)
    return Translator(TorchEngine(model, src, tgt), decode)


def test_batched_translation_equals_one_at_a_time_in_input_order(translator):
    sentences = [
        "Tom can see the cat.",
        "I will buy the book.",
        "",
        "She should draw.",
        "We can find the dog and the car.",
        "He will see.",
    ]
    batched = translator.translate(sentences)
    assert batched == [translator.translate([s])[0] for s in sentences]
    assert batched[2] == ""


def test_input_is_normalised_like_the_training_data(translator):
    assert translator.translate(["Ｔｏｍ  can\u3000see the cat."]) == translator.translate(
        ["Tom can see the cat."]
    )


def test_too_long_input_is_translated_in_pieces_with_one_warning(translator, caplog):
    long = " ".join(["Tom can see the cat and the dog."] * 10)
    with caplog.at_level(logging.WARNING, logger="translator"):
        out = translator.translate([long, "Tom can see the cat.", long], split=False)
    assert len(out) == 3 and out[0] == out[2]
    assert caplog.text.count("WARNING") == 1  # one warning for the whole document
    assert "2 lines longer than the model's 16 tokens" in caplog.text


def test_byte_pieces_never_break_an_output_line(translator):
    """With byte fallback the model can write a newline, a NUL or half a character."""
    tok = translator.tgt_tok
    byte = lambda b: tok.piece_to_id(f"<0x{b:02X}>")  # noqa: E731
    ids = tok.encode("我会买书。") + [byte(0x0A), byte(0x00), byte(0xE7)] + tok.encode("猫")
    assert "\n" in tok.decode(ids) and "\ufffd" in tok.decode(ids)
    assert translator.detokenize(ids) == "我会买书。 猫"
