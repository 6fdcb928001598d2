import torch
from conftest import generated_pairs, tiny_config

from translator.corpus.preparer import prepare
from translator.data.layout import split_file
from translator.inference.text import Translator
from translator.training.trainer import train


def test_tiny_model_overfits_a_handful_of_pairs(tmp_path, corpus):
    config = tiny_config(
        tmp_path,
        model={"d_model": 64, "ff_dim": 128, "heads": 4, "encoder_layers": 2, "decoder_layers": 2},
        train={
            "max_epochs": 20,  # loss 0.004 by then: ten times under the bar
            "lr": 3e-3,
            "warmup_steps": 10,
            "label_smoothing": 0.0,
            "plateau_patience": 100,
            "patience": 1000,
            "bleu_samples": 8,
        },
    )
    prepare(config.data)  # tokenizers from the whole generated corpus
    pairs = generated_pairs(8, seed=5)
    for split in ("train", "valid"):  # then train (and validate) on 8 pairs only
        for lang, side in (("en", 0), ("zh", 1)):
            split_file(config.data.dir, split, lang).write_text(
                "".join(pair[side] + "\n" for pair in pairs), encoding="utf-8"
            )
    result = train(config, progress=False)
    assert result.history[-1]["train_loss"] < 0.05
    translator = Translator.from_checkpoint(
        tmp_path / "run/checkpoints/best.pt", torch.device("cpu")
    )
    assert translator.translate([en for en, _ in pairs]) == [zh for _, zh in pairs]
