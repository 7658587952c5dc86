"""nn.functional.ctc_loss on npusim: the forward variables one fused kernel per frame, the backward variables the same
way, the gradient from their products per class; losses and gradients equal the CPU's, with no operator falling
back."""

import os

import pytest
import torch
import torch.nn.functional as F

import npusim

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may be fetched

FRAMES, BATCH, CLASSES = 12, 3, 6
INPUT_LENGTHS = torch.tensor([12, 9, 4])
TARGET_LENGTHS = torch.tensor([4, 3, 3])
# Repeated labels need a blank between them; the last sequence (5, 5, 5 in 4 frames) has no path: an infinite loss.
PADDED_TARGETS = torch.tensor([[1, 2, 2, 3], [4, 4, 1, 0], [5, 5, 5, 0]])


def concatenated(targets, lengths):
    return torch.cat([row[:length] for row, length in zip(targets, lengths, strict=True)])


@pytest.mark.parametrize("layout", ["padded", "concatenated"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True], ids=["inf", "zero_infinity"])
def test_ctc_loss_and_its_gradient_match_the_cpu(layout, reduction, zero_infinity, device):
    logits = torch.randn(FRAMES, BATCH, CLASSES, generator=torch.Generator().manual_seed(1), requires_grad=True)
    targets = PADDED_TARGETS if layout == "padded" else concatenated(PADDED_TARGETS, TARGET_LENGTHS)
    options = dict(blank=0, reduction=reduction, zero_infinity=zero_infinity)
    expected = F.ctc_loss(logits.log_softmax(2), targets, INPUT_LENGTHS, TARGET_LENGTHS, **options)
    (expected_grad,) = torch.autograd.grad(expected.sum(), logits)
    on_device = logits.detach().to(device).requires_grad_()
    with npusim.profile() as report:
        loss = F.ctc_loss(
            on_device.log_softmax(2), targets.to(device), INPUT_LENGTHS.to(device), TARGET_LENGTHS.to(device), **options
        )
        (grad,) = torch.autograd.grad(loss.sum(), on_device)
        loss, grad = loss.cpu(), grad.cpu()
    assert report.fallbacks == {}
    assert {"ctc_alpha_f32", "ctc_beta_f32"} <= {record.name for record in report.kernels}
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5, equal_nan=True)
    if zero_infinity or reduction == "none":
        assert torch.isfinite(grad).all() == zero_infinity  # an infinite loss has NaN gradients unless zeroed


def test_lengths_given_as_lists_and_a_blank_other_than_zero(device):
    log_probs = torch.randn(7, 2, 5, generator=torch.Generator().manual_seed(2)).log_softmax(2)
    targets = torch.tensor([[0, 1, 0], [2, 2, 0]])
    expected = F.ctc_loss(log_probs, targets, [7, 6], [3, 2], blank=4, reduction="none")
    with npusim.profile() as report:
        loss = F.ctc_loss(log_probs.to(device), targets.to(device), [7, 6], [3, 2], blank=4, reduction="none")
    assert report.fallbacks == {}
    torch.testing.assert_close(loss.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_invalid_lengths_raise_the_cpus_error(device):
    log_probs = torch.randn(5, 2, 4).log_softmax(2)
    targets = torch.tensor([[1, 2], [3, 1]])
    with pytest.raises(RuntimeError, match="input_lengths") as on_cpu:
        F.ctc_loss(log_probs, targets, [6, 5], [2, 2])
    with pytest.raises(RuntimeError, match="input_lengths") as on_device:
        F.ctc_loss(log_probs.to(device), targets.to(device), [6, 5], [2, 2])
    assert str(on_device.value).splitlines()[0] == str(on_cpu.value).splitlines()[0]


def test_wav2vec2_trains_with_its_ctc_loss_natively(device):
    """transformers' Wav2Vec2ForCTC (small config, random weights): the CTC loss over its 39 frames, forward and
    backward on the device, equal to the CPU."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    config = Wav2Vec2Config(
        vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, mask_time_prob=0.0, hidden_dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Wav2Vec2ForCTC(config)
    audio = torch.randn(2, 400, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([[3, 5, 5, 9, 0, 0], [7, 1, 2, 2, 4, 6]])  # 0 pads the first
    expected = model(input_values=audio, labels=labels).loss
    expected.backward()
    expected_grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model.to(device)
    with npusim.profile() as report:
        loss = model(input_values=audio.to(device), labels=labels.to(device)).loss
        loss.backward()
        torch.npusim.synchronize()
    assert report.fallbacks == {}
    torch.testing.assert_close(loss.cpu(), expected, rtol=1e-4, atol=1e-5)
    for name, grad in expected_grads.items():
        torch.testing.assert_close(dict(model.named_parameters())[name].grad.cpu(), grad, rtol=1e-3, atol=1e-4)
