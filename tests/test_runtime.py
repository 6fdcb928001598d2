"""Runtime settings: the allocator, device choice and what choosing CUDA sets."""

import platform

import pytest
import torch

from translator.errors import UserError
from translator.runtime import keep_freed_memory, pick_device


def test_allocator_setting_applies_on_glibc():
    assert keep_freed_memory() == (
        platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    )


def test_device_names():
    assert pick_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device("auto").type == expected
    with pytest.raises(UserError, match="unknown device 'tpu'"):
        pick_device("tpu")


def test_choosing_cuda_leaves_cudnn_out_of_attention(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    torch.backends.cuda.enable_cudnn_sdp(True)
    try:
        assert pick_device("cpu").type == "cpu" and torch.backends.cuda.cudnn_sdp_enabled()
        assert pick_device("cuda:1") == torch.device("cuda:1")
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
