"""PyTorch's inference fast paths on npusim: nn.TransformerEncoderLayer and nn.MultiheadAttention in eval mode without
autograd call _transformer_encoder_layer_fwd and _native_multi_head_attention, which npusim composes from its native
kernels; results follow the CPU's, with no CPU fallback."""

import copy

import pytest
import torch

import npusim

X = torch.randn(2, 10, 32, generator=torch.Generator().manual_seed(0))
PADDING = torch.zeros(2, 10, dtype=torch.bool)
PADDING[1, 7:] = True
CAUSAL = torch.triu(torch.ones(10, 10, dtype=torch.bool), 1)


@pytest.mark.parametrize("norm_first", [False, True], ids=["norm after", "norm first"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masks", [{}, {"src_key_padding_mask": PADDING}, {"src_mask": CAUSAL}], ids=str)
def test_encoder_layer_fast_path_runs_natively(norm_first, activation, masks):
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first, activation=activation)
    layer.eval()
    on_device = copy.deepcopy(layer).to("npusim")
    with torch.no_grad():
        expected = layer(X, **masks)
        with npusim.profile() as report:
            actual = on_device(X.to("npusim"), **{name: mask.to("npusim") for name, mask in masks.items()})
    assert report.fallbacks == {}
    assert any(k.startswith("matmul") for k in report.by_kernel())  # the projections ran on the matrix engine
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize(
    "options",
    [{}, {"need_weights": False}, {"average_attn_weights": False}, {"key_padding_mask": PADDING}],
    ids=["weights averaged", "no weights", "weights per head", "key padding"],
)
def test_multi_head_attention_fast_path_returns_the_cpus_output_and_weights(options):
    torch.manual_seed(2)
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    on_device = copy.deepcopy(attention).to("npusim")
    x = X.to("npusim")
    with torch.no_grad():
        expected = attention(X, X, X, **options)
        with npusim.profile() as report:
            actual = on_device(x, x, x, **{k: v.to("npusim") if torch.is_tensor(v) else v for k, v in options.items()})
    assert report.fallbacks == {}
    torch.testing.assert_close(actual[0].cpu(), expected[0], rtol=1e-5, atol=1e-6)
    if expected[1] is None:
        assert actual[1] is None
    else:
        torch.testing.assert_close(actual[1].cpu(), expected[1], rtol=1e-5, atol=1e-6)


def test_a_fully_masked_row_is_nan_as_on_the_cpu():
    x = torch.randn(1, 3, 8, generator=torch.Generator().manual_seed(3))
    mask = torch.zeros(1, 2, 3, 3, dtype=torch.bool)
    mask[0, 1, 2] = True  # head 1's last query sees no key
    args = (8, 2, torch.randn(24, 8) / 3, torch.zeros(24), torch.eye(8), torch.zeros(8))
    expected = torch._native_multi_head_attention(x, x, x, *args, mask, True, False, 2)
    on_device = x.to("npusim")
    actual = torch._native_multi_head_attention(
        on_device,
        on_device,
        on_device,
        *(a.to("npusim") if torch.is_tensor(a) else a for a in args),
        mask.to("npusim"),
        True,
        False,
        2,
    )
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert expected[1][0, 1, 2].isnan().all() and not expected[1][0, 0].isnan().any()


@pytest.mark.parametrize("norm", [False, True], ids=["no final norm", "final norm"])
def test_encoder_with_a_padding_mask_runs_its_nested_fast_path_natively(norm):
    """nn.TransformerEncoder in eval mode packs the unpadded rows into a nested tensor, runs its layers on it and pads
    the result with zeros: the same numbers as the CPU's, padded rows included, and nothing on the CPU."""
    torch.manual_seed(4)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(32) if norm else None).eval()
    padding = torch.zeros(3, 10, dtype=torch.bool)
    padding[1, 6:] = True
    padding[2, 1:] = True
    on_device = copy.deepcopy(encoder).to("npusim")
    x = torch.randn(3, 10, 32, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=padding)
        with npusim.profile() as report:
            actual = on_device(x.to("npusim"), src_key_padding_mask=padding.to("npusim"))
    assert report.fallbacks == {}
    assert (expected[1, 6:] == 0).all() and (actual.cpu()[1, 6:] == 0).all()  # the nested path was taken
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=2e-6)


def test_a_padding_mask_not_left_aligned_takes_the_dense_path_as_on_the_cpu():
    torch.manual_seed(6)
    encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 1).eval()
    padding = torch.zeros(2, 10, dtype=torch.bool)
    padding[1, :3] = True  # padding first: not left-aligned
    on_device = copy.deepcopy(encoder).to("npusim")
    with torch.no_grad():
        expected = encoder(X, src_key_padding_mask=padding)
        actual = on_device(X.to("npusim"), src_key_padding_mask=padding.to("npusim"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=2e-6)
    with pytest.raises(RuntimeError, match="left-aligned"):
        torch._nested_tensor_from_mask(X.to("npusim"), padding.logical_not().to("npusim"), mask_check=True)


def test_nested_tensor_pads_to_the_size_asked_for():
    kept = torch.tensor([[True, True, False], [True, False, False]])
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(7))
    expected = torch._nested_tensor_from_mask(x, kept).to_padded_tensor(-1.0, (2, 5, 4))
    actual = torch._nested_tensor_from_mask(x.to("npusim"), kept.to("npusim")).to_padded_tensor(-1.0, (2, 5, 4))
    torch.testing.assert_close(actual.cpu(), expected)
    with pytest.raises(RuntimeError, match="smaller"):
        torch._nested_tensor_from_mask(x.to("npusim"), kept.to("npusim")).to_padded_tensor(0.0, (2, 1, 4))
