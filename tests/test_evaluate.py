"""Multi-reference scoring: one hypothesis per sentence, all its references, no double
counting; the first-reference score beside it."""

import pytest
from sacrebleu.metrics import BLEU

from translator.data.layout import group_references
from translator.errors import UserError
from translator.evaluation.scoring import read_eval_set, reference_streams, score


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


def test_eval_hyp_scores_another_systems_file_like_sacrebleu(tmp_path):
    """`eval --hyp` needs no model: its BLEU/chrF are sacrebleu's (tokenize zh) over every
    reference file; a blank reference line is a missing reference, not an empty one."""
    import sacrebleu
    from conftest import assert_one_line_error, run_cli

    hyps = ["我有一只猫。", "车站在哪里？", "他和她一起去。"]
    ref_a = ["我有一只猫。", "火车站在哪儿？", "他跟她一起去。"]
    ref_b = ["我养了一只猫。", "", "他总是和她一起去。"]
    for name, lines in (("hyp.txt", hyps), ("a.txt", ref_a), ("b.txt", ref_b)):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_cli("eval", "--hyp", "hyp.txt", "--ref", "a.txt", "--ref", "b.txt", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    streams = [ref_a, [ref_b[0], None, ref_b[2]]]
    bleu = sacrebleu.corpus_bleu(hyps, streams, tokenize="zh").score
    chrf = sacrebleu.corpus_chrf(hyps, streams).score
    assert f"BLEU = {bleu:.2f}" in result.stdout and f"chrF = {chrf:.2f}" in result.stdout
    assert "3 sentences, 5 references; hypotheses from hyp.txt" in result.stdout
    one = run_cli("eval", "--hyp", "hyp.txt", "--ref", "a.txt", cwd=tmp_path)
    only_a = sacrebleu.corpus_bleu(hyps, [ref_a], tokenize="zh").score
    assert f"BLEU = {only_a:.2f}" in one.stdout

    (tmp_path / "short.txt").write_text("我有一只猫。\n", encoding="utf-8")
    assert_one_line_error(
        run_cli("eval", "--hyp", "hyp.txt", "--ref", "short.txt", cwd=tmp_path), "has 3 lines"
    )
    assert_one_line_error(run_cli("eval", "--hyp", "hyp.txt", cwd=tmp_path), "--ref")
