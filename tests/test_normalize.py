from translator.data.normalize import normalize_en, normalize_zh


def test_traditional_becomes_simplified():
    assert normalize_zh("我們的學校很大。") == "我们的学校很大。"
    assert normalize_zh("時間過得真快。") == "时间过得真快。"


def test_fullwidth_digits_and_latin_letters_become_ascii():
    assert normalize_zh("我有３个ＡＰＰ，ｏｋ。") == "我有3个APP，ok。"
    assert normalize_en("Ｒｏｏｍ ３０５") == "Room 305"


def test_chinese_punctuation_is_kept():
    text = "你好，世界！真的吗？他说：“好。”……（完）"
    assert normalize_zh(text) == text


def test_whitespace_is_collapsed_including_ideographic_space():
    assert normalize_en("  Hello \t  world\u3000again ") == "Hello world again"
    assert normalize_zh("他是一个\u3000 DJ 。") == "他是一个 DJ 。"


def test_normalisation_is_idempotent():
    for text in ["我們有３本書。", "ＡＢＣ  def"]:
        assert normalize_zh(normalize_zh(text)) == normalize_zh(text)
