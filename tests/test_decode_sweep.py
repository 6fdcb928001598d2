"""scripts/studies/decode_sweep.py: every (beam, alpha) pair scored on valid (and test), the best by
mean validation BLEU marked; its BLEU is `translator eval`'s."""

from pathlib import Path

from conftest import run_script
from sacrebleu.metrics import BLEU

from translator.data.layout import read_references
from translator.evaluation.scoring import reference_streams, score
from translator.inference.text import Translator

SWEEP = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "decode_sweep.py"


def table(stdout: str) -> list[list[str]]:
    rows = [line.strip("|").split("|") for line in stdout.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row] for row in rows[2:]]


def test_the_sweep_scores_each_pair_and_marks_the_best_by_validation(trained):
    data = trained.parents[2] / "prepared"
    args = [str(trained), str(trained), "--data", str(data)]
    args += ["--beams", "1", "3", "--alphas", "0", "1", "--test"]
    done = run_script("scripts/studies/decode_sweep.py", *args, cwd=trained.parent)
    assert done.returncode == 0, done.stderr
    rows = table(done.stdout)
    pairs = [(r[0], r[1].split()[0]) for r in rows]
    assert pairs == [("1", "0"), ("1", "1"), ("3", "0"), ("3", "1")]
    means = [float(r[2]) for r in rows]
    assert sum("(best)" in r[1] for r in rows) == 1
    assert "(best)" in rows[means.index(max(means))][1]
    valid_a, valid_b, test_a, test_b = (float(cell) for cell in rows[0][4:])
    assert valid_a == valid_b == means[0] and test_a == test_b  # one checkpoint, twice

    translator = Translator.from_checkpoint(trained, "cpu", beam=1)
    for split, expected in (("valid", valid_a), ("test", test_a)):
        sources, references = read_references(data, split)
        hypotheses = translator.translate(sources, split=False)
        assert round(score(hypotheses, references).bleu, 2) == expected  # `translator eval`'s
        if split == "valid":  # sacrebleu's output length over the references'
            result = BLEU(tokenize="zh").corpus_score(hypotheses, reference_streams(references))
            assert float(rows[0][3]) == round(result.sys_len / result.ref_len, 3)
