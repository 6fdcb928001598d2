"""`translator attention`: cross-attention weights read after decoding, drawn as a heatmap
with Chinese glyphs; the decoding path itself is untouched."""

import pytest
import torch
from conftest import assert_one_line_error, run_cli, tiny_config, to_toml

from translator import Translator
from translator.errors import UserError
from translator.inspect.attention import cross_attention, plot_attention


def test_weights_are_distributions_over_the_source_for_every_written_piece(trained):
    translator = Translator.from_checkpoint(trained, "cpu")
    decoder = translator.engine.model.decoder
    found = cross_attention(translator, "where is the big station ?")
    layers, heads = len(decoder), translator.engine.model.model_cfg.heads
    assert found.weights.shape == (layers, heads, len(found.target), len(found.source))
    assert found.source[-1] == "</s>" and found.target[-1] == "</s>"
    torch.testing.assert_close(found.weights.sum(-1), torch.ones(layers, heads, len(found.target)))
    assert found.translation == translator.translate(["where is the big station ?"])[0]
    mean = found.select(None)
    torch.testing.assert_close(mean, found.weights.mean(dim=(0, 1)))
    torch.testing.assert_close(found.select(1), found.weights[0].mean(0))
    with pytest.raises(UserError, match="--layer must be 1 to"):
        found.select(layers + 1)
    assert all(not layer.cross_attn._forward_hooks for layer in decoder)  # hooks removed


def test_the_heatmap_is_written_with_chinese_glyphs_and_is_not_blank(trained, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    translator = Translator.from_checkpoint(trained, "cpu")
    out = plot_attention(cross_attention(translator, "i have a cat ."), tmp_path / "a.png", None)
    pixels = imread(out)[..., :3]
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300
    assert (pixels.mean(-1) < 0.8).mean() > 0.05  # the heatmap and labels, not white


def test_a_cjk_font_is_found_where_one_is_installed():
    pytest.importorskip("matplotlib")
    from matplotlib import font_manager

    from translator.inspect.attention import cjk_font

    has_cjk = any("CJK" in font.name for font in font_manager.fontManager.ttflist)
    if not has_cjk:
        pytest.skip("no CJK font installed (Debian: fonts-noto-cjk)")
    assert cjk_font() is not None


def test_cli_writes_the_png_and_a_bad_layer_is_one_line(trained, tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "tiny.toml").write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    result = run_cli("attention", "i have a cat .", "-c", "tiny.toml", "-o", "a.png", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and "wrote a.png" in result.stdout
    bad = run_cli("attention", "hi .", "-c", "tiny.toml", "--layer", "9", cwd=tmp_path)
    assert_one_line_error(bad, "--layer must be 1 to")
    assert_one_line_error(run_cli("attention", " ", "-c", "tiny.toml", cwd=tmp_path), "blank")
