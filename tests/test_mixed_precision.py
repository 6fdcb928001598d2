"""The bf16 autocast path that training and decoding take on CUDA, exercised on the CPU
(CI has no GPU; the dtype handling is the same)."""

import torch
from conftest import tiny_config
from reference import greedy, make_batches

from translator.data.batching import padding_mask
from translator.model.loss import sequence_loss
from translator.model.transformer import Transformer


def test_bf16_autocast_training_step_and_decoding(tmp_path):
    torch.manual_seed(0)
    model_cfg = tiny_config(tmp_path).model
    model = Transformer(model_cfg, 40, 50)
    seqs = [torch.randint(4, 40, (n,)).numpy() for n in (3, 5, 7, 9)]
    batch = make_batches(seqs, seqs, max_tokens=64)[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(batch.src, batch.tgt_in, batch.src_mask)
        loss = sequence_loss(logits, batch.tgt_out, 0.1)
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    (loss / batch.n_tokens).backward()
    assert all(
        p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
        for p in model.parameters()
        if p.grad is not None
    )

    model.eval()
    src = batch.src
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = greedy(model, src, padding_mask(src), torch.full((src.size(0),), 6))
    assert len(out) == src.size(0) and all(len(row) <= 6 for row in out)
