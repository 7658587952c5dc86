"""Complex64 through operators linear in their tensors (complex_in_parts.cpp: the float32 kernel on each part), against
the CPU with no CPU fallback: index_add and scatter_add (functional, in place, out=, with a real alpha), the padding
backwards, and the gradients of indexing and padding that are made of them; a complex alpha, which would mix the
parts, still computed correctly."""

import pytest
import torch

import npusim


def complex_randn(*shape, seed=0):
    return torch.randn(shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(seed))


def assert_matches(actual, expected):
    assert actual.device.type == "npusim" and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected)


def test_accumulations_in_every_variant(no_fallback):
    values, source = complex_randn(6, 5), complex_randn(3, 5, seed=1)
    index = torch.tensor([0, 2, 0])
    device, device_source, device_index = values.to("npusim"), source.to("npusim"), index.to("npusim")
    assert_matches(
        device.index_add(0, device_index, device_source, alpha=2), values.index_add(0, index, source, alpha=2)
    )
    in_place = device.clone()
    assert in_place.index_add_(0, device_index, device_source) is in_place
    assert_matches(in_place, values.index_add(0, index, source))
    out = torch.empty(0, dtype=torch.complex64, device="npusim")
    assert torch.index_add(device, 0, device_index, device_source, out=out) is out
    assert_matches(out, values.index_add(0, index, source))
    scatter_index = torch.tensor([[1, 0, 2, 3, 4], [1, 1, 1, 1, 1]])
    assert_matches(
        device.scatter_add(0, scatter_index.to("npusim"), device_source[:2]),
        values.scatter_add(0, scatter_index, source[:2]),
    )
    assert_matches(device.conj().index_add(0, device_index, device_source), values.conj().index_add(0, index, source))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_padding_gradients(no_fallback, mode):
    values = complex_randn(2, 3, 8)
    weights = complex_randn(2, 3, 12, seed=1)
    on_cpu, on_device = values.clone().requires_grad_(), values.to("npusim").requires_grad_()
    for x, w in ((on_cpu, weights), (on_device, weights.to("npusim"))):
        (torch.nn.functional.pad(x, (2, 2), mode=mode) * w).real.sum().backward()
    assert_matches(on_device.grad, on_cpu.grad)


def test_gradients_of_indexing_and_sigmoid(no_fallback):
    values = complex_randn(6, 5)
    index = torch.tensor([4, 0, 4, 2])

    def loss(x, i):
        return (torch.sigmoid(x.index_select(0, i)) * x.gather(1, i.view(2, 2).repeat(3, 1))[:4, :1]).abs().sum()

    on_cpu, on_device = values.clone().requires_grad_(), values.to("npusim").requires_grad_()
    loss(on_cpu, index).backward()
    loss(on_device, index.to("npusim")).backward()
    assert_matches(on_device.grad, on_cpu.grad)


def test_a_complex_alpha_is_not_split_into_parts():
    values, source = complex_randn(6, 5), complex_randn(3, 5, seed=1)
    index = torch.tensor([0, 2, 0])
    expected = values.index_add(0, index, source, alpha=1j)
    npusim._C.reset_fallback_counts()
    actual = values.to("npusim").index_add(0, index.to("npusim"), source.to("npusim"), alpha=1j)
    torch.testing.assert_close(actual.cpu(), expected)
    assert npusim._C.fallback_counts()  # on the CPU, counted
