from zhconv.zhconv import getdict

from translator.data.normalization import normalize_en, normalize_zh, to_simplified

# lines of the shared Tatoeba file that zhconv (zh-hans or zh-cn) changes though they are
# simplified already
ALREADY_SIMPLIFIED = [
    "有什么喝的吗？",  # zh-hans: 有什幺喝的吗？
    "你想要什么喝的吗？",
    "你没必要那么正式。",  # zh-hans: 你没必要那幺正式。
    "么女长得特别漂亮。",
    "「你几岁？」「我十六岁。」",  # zh-hans: “你几岁？”“我十六岁。”
    "他说：「我想成为医生。」",
    "今天是我姊姊的生日。",  # zh-cn: 姐姐
    "汤姆喜欢辣咖哩。",  # zh-cn: 咖喱
    "你的穿著非常好。",  # zh-cn: 穿着
    "大部份的人觉得我疯了。",  # zh-cn: 部分
    "这块木板大约两公尺长。",  # zh-cn: 两米
    "我藉由听音乐来鼓舞我自己。",
]


def test_simplified_lines_come_out_unchanged():
    for line in ALREADY_SIMPLIFIED:
        assert normalize_zh(line) == line


def test_traditional_becomes_simplified():
    assert normalize_zh("我們的學校很大。") == "我们的学校很大。"
    assert normalize_zh("時間過得真快。") == "时间过得真快。"
    assert normalize_zh("有什麼喝的嗎？") == "有什么喝的吗？"
    assert normalize_zh("乾淨的衣服") == "干净的衣服"
    assert normalize_zh("他們藉由聽音樂放鬆。") == "他们借由听音乐放松。"


def test_traditional_variants_in_the_shared_file_are_converted():
    assert normalize_zh("汤姆让玛丽幚约翰。") == "汤姆让玛丽帮约翰。"
    assert normalize_zh("我絶不会让你去做。") == "我绝不会让你去做。"
    assert normalize_zh("我家后面有条胡衕。") == "我家后面有条胡同。"
    assert normalize_zh("妳看上去非常累。") == "你看上去非常累。"


def test_punctuation_and_simplified_characters_survive_in_a_traditional_line():
    assert normalize_zh("他說：「我想成為醫生。」") == "他说：「我想成为医生。」"
    assert normalize_zh("我們有什么喝的") == "我们有什么喝的"  # 么喝 is not rewritten


def test_zhconv_zh_hans_keeps_lengths():
    """to_simplified aligns zhconv's output with its input character by character."""
    assert all(len(k) == len(v) for k, v in getdict("zh-hans").items())
    assert len(to_simplified("「我們」" * 50)) == len("「我們」" * 50)


def test_fullwidth_digits_and_latin_letters_become_ascii():
    assert normalize_zh("我有３个ＡＰＰ，ｏｋ。") == "我有3个APP，ok。"
    assert normalize_en("Ｒｏｏｍ ３０５") == "Room 305"


def test_chinese_punctuation_is_kept():
    text = "你好，世界！真的吗？他说：“好。”……（完）「对」『是』"
    assert normalize_zh(text) == text


def test_whitespace_is_collapsed_including_ideographic_space():
    assert normalize_en("  Hello \t  world\u3000again ") == "Hello world again"
    assert normalize_zh("他是一个\u3000 DJ 。") == "他是一个 DJ 。"


def test_byte_order_marks_are_removed():
    assert normalize_en("\ufeffHello.") == "Hello."
    assert normalize_zh("你\ufeff好。") == "你好。"


def test_normalisation_is_idempotent():
    for text in ["我們有３本書。", "ＡＢＣ  def", *ALREADY_SIMPLIFIED]:
        assert normalize_zh(normalize_zh(text)) == normalize_zh(text)
