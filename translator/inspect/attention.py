"""`translator attention "text" -o attn.png`: where the decoder looked — its cross-attention
over the source pieces for each piece it wrote, as a heatmap.

The weights are read in one teacher-forced pass over the translation, from hooks that
exist only during the pass: the decoding path uses fused kernels that never form them.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from translator.data.batching import pad, padding_mask
from translator.data.normalization import normalize_en
from translator.data.tokenizer import BOS
from translator.errors import UserError
from translator.inference.text import Translator
from translator.inspect.plot import require_matplotlib
from translator.model.transformer import CrossAttention, split_heads

log = logging.getLogger(__name__)

# Fonts with Chinese glyphs, in order of preference (Debian: fonts-noto-cjk, fonts-wqy-*)
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Serif CJK SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "AR PL UMing CN",
    "Microsoft YaHei",
    "SimHei",
    "PingFang SC",
    "Heiti SC",
    "Arial Unicode MS",
)


@dataclass
class Attention:
    source: list[str]  # source pieces, ending in </s>
    target: list[str]  # the pieces written, then </s> (what the last row predicted)
    weights: torch.Tensor  # (layers, heads, T, S): each row sums to 1
    translation: str

    def select(self, layer: int | None) -> torch.Tensor:
        """(T, S): one layer (1-based) averaged over its heads, or the mean over all."""
        if layer is None:
            return self.weights.mean(dim=(0, 1))
        if not 1 <= layer <= self.weights.size(0):
            raise UserError(f"--layer must be 1 to {self.weights.size(0)}, got {layer}")
        return self.weights[layer - 1].mean(dim=0)


def cross_attention(translator: Translator, text: str) -> Attention:
    """Translate `text`, then read every decoder layer's cross-attention over the output."""
    english = normalize_en(text)
    if not english:
        raise UserError("nothing to translate: the text is blank")
    source, ids = translator.decoded(english)
    model, device = translator.engine.model, translator.engine.device
    src = pad([source]).to(device)
    mask = padding_mask(src)
    tgt = torch.tensor([[BOS, *ids]], device=device)
    captured: list[torch.Tensor] = []

    def record(module: CrossAttention, args, _output) -> None:
        x, (keys, _values), key_mask = args[0], args[1], args[2]
        queries = split_heads(module.q(x), module.heads)
        scores = queries @ keys.transpose(-1, -2) / math.sqrt(queries.size(-1))
        captured.append(scores.masked_fill(~key_mask, float("-inf")).softmax(-1)[0])

    hooks = [layer.cross_attn.register_forward_hook(record) for layer in model.decoder]
    try:
        with torch.inference_mode():
            model.decode(tgt, model.start_decoding(model.encode(src, mask), mask))
    finally:
        for hook in hooks:
            hook.remove()
    return Attention(
        source=[translator.src_tok.id_to_piece(int(i)) for i in source],
        target=[translator.tgt_tok.id_to_piece(int(i)) for i in ids] + ["</s>"],
        weights=torch.stack(captured).float().cpu(),
        translation=translator.detokenize(ids),
    )


def cjk_font() -> str | None:
    """The name of an installed font with Chinese glyphs, or None."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    preferred = next((name for name in CJK_FONTS if name in installed), None)
    return preferred or next((name for name in sorted(installed) if "CJK" in name), None)


def plot_attention(attention: Attention, out: Path, layer: int | None) -> Path:
    """The heatmap: generated pieces down, source pieces across."""
    weights = attention.select(layer).numpy()  # a bad layer fails before anything is drawn
    plt = require_matplotlib()
    font = cjk_font()
    if font is None:
        log.warning(
            "no font with Chinese glyphs found (Debian: apt install fonts-noto-cjk); "
            "Chinese pieces will show as boxes"
        )
    families = [font, "DejaVu Sans"] if font else ["DejaVu Sans"]
    rows, columns = weights.shape
    size = (max(4.0, 0.55 * columns + 2.5), max(3.0, 0.45 * rows + 1.8))
    with plt.rc_context({"font.family": families, "axes.unicode_minus": False}):
        fig, axes = plt.subplots(figsize=size, constrained_layout=True)
        image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        axes.set_xticks(range(columns), attention.source, rotation=60, ha="right")
        axes.set_yticks(range(rows), attention.target)
        axes.set(xlabel="source pieces (English)", ylabel="generated pieces (Chinese)")
        which = "mean over layers and heads" if layer is None else f"layer {layer}, mean of heads"
        axes.set_title(f"{attention.translation}\ncross-attention, {which}", fontsize=10)
        fig.colorbar(image, ax=axes, shrink=0.8)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=120)
        plt.close(fig)
    return out
