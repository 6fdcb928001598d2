"""Multi-reference scoring: one hypothesis per sentence, all its references, no double
counting; the first-reference score beside it."""

import pytest
from sacrebleu.metrics import BLEU

from translator.data.layout import group_references
from translator.errors import UserError
from translator.evaluate import read_eval_set, reference_streams, score


def test_a_hypothesis_matching_any_reference_scores_full_marks():
    hyps = ["我知道汤姆有点担心。", "下雨了。"]
    refs = [["我晓得汤姆有一点担心。", "我知道汤姆有点担心。"], ["下雨了。"]]
    s = score(hyps, refs)
    assert s.bleu == pytest.approx(100.0) and s.chrf == pytest.approx(100.0)
    assert s.bleu_1ref < 100.0  # the first reference alone does not match
    assert s.sentences == 2 and s.references == 3
    assert "nrefs:var" in s.bleu_signature and "tok:zh" in s.bleu_signature
    assert "nrefs:1" in s.bleu_1ref_signature


def test_streams_are_padded_with_none_and_scored_like_sacrebleu():
    refs = [["甲乙丙丁。"], ["一二三四五。", "一二三四。", "一二三。"], ["好的。", "行。"]]
    assert reference_streams(refs) == [
        ["甲乙丙丁。", "一二三四五。", "好的。"],
        [None, "一二三四。", "行。"],
        [None, "一二三。", None],
    ]
    hyps = ["甲乙丙。", "一二三四。", "好。"]
    expected = BLEU(tokenize="zh").corpus_score(hyps, reference_streams(refs)).score
    assert score(hyps, refs).bleu == pytest.approx(expected)


def test_each_sentence_is_scored_once_not_once_per_translation():
    pairs = [("It rains.", "下雨了。"), ("It rains.", "在下雨。"), ("Hi.", "你好。")]
    sources, refs = group_references([p[0] for p in pairs], [p[1] for p in pairs])
    assert sources == ["It rains.", "Hi."] and refs == [["下雨了。", "在下雨。"], ["你好。"]]
    assert score(["在下雨。", "你好。"], refs).sentences == 2


def test_mismatched_counts_are_user_errors():
    with pytest.raises(UserError, match="2 hypotheses but 1 references"):
        score(["a", "b"], [["a"]])
    with pytest.raises(UserError, match="at least one reference"):
        score(["a"], [[]])


def test_reference_files_are_read_line_aligned(tmp_path):
    (tmp_path / "src.en").write_text("Hi.\nBye.")  # no final newline
    (tmp_path / "a.zh").write_text("你好。\n再见。\n")
    (tmp_path / "b.zh").write_bytes("嗨。\r\n拜拜。\r\n".encode())
    sources, refs = read_eval_set(tmp_path / "src.en", [tmp_path / "a.zh", tmp_path / "b.zh"])
    assert sources == ["Hi.", "Bye."] and refs == [["你好。", "嗨。"], ["再见。", "拜拜。"]]
    (tmp_path / "short.zh").write_text("你好。\n")
    with pytest.raises(UserError, match="has 2 lines but .*short.zh has 1"):
        read_eval_set(tmp_path / "src.en", [tmp_path / "short.zh"])
