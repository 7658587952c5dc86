"""nn.FractionalMaxPool2d / 3d on the device, against the CPU with no CPU fallback: given the same random samples,
the same windows, maxima and indices bit for bit (batched and unbatched, NaN and ties as the CPU picks them), and the
same input gradients; with samples drawn on the device, a module trains."""

import pytest
import torch
import torch.nn.functional as F

import npusim  # noqa: F401  registers the device


@pytest.fixture(autouse=True)
def native_only(no_fallback):
    pass


CASES = [
    (F.fractional_max_pool2d, (2, 3, 9, 11), (4, 3), (3, 5)),
    (F.fractional_max_pool2d, (3, 9, 9), 2, (4, 4)),
    (F.fractional_max_pool2d, (1, 2, 8, 8), 3, 1),
    (F.fractional_max_pool3d, (2, 3, 5, 5, 5), 2, (2, 3, 2)),
    (F.fractional_max_pool3d, (1, 2, 6, 7, 5), (2, 3, 2), (3, 3, 2)),
]


@pytest.mark.parametrize("pool, shape, kernel_size, output_size", CASES)
def test_pooling_and_its_gradient_are_the_cpus(pool, shape, kernel_size, output_size):
    generator = torch.Generator().manual_seed(0)
    dims = 2 if pool is F.fractional_max_pool2d else 3
    x = torch.randn(shape, generator=generator)
    x.view(-1)[3] = float("nan")
    samples = torch.rand(shape[0] if len(shape) == dims + 2 else 1, shape[-dims - 1], dims, generator=generator)
    cpu_input = x.clone().requires_grad_()
    expected, expected_indices = pool(cpu_input, kernel_size, output_size, return_indices=True, _random_samples=samples)
    device_input = x.to("npusim").requires_grad_()
    actual, indices = pool(
        device_input, kernel_size, output_size, return_indices=True, _random_samples=samples.to("npusim")
    )
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(indices.cpu(), expected_indices)
    weights = torch.randn(expected.shape, generator=generator)
    (expected.nan_to_num() * weights).sum().backward()
    (actual.nan_to_num() * weights.to("npusim")).sum().backward()
    torch.testing.assert_close(device_input.grad.cpu(), cpu_input.grad)


def test_a_module_with_fractional_pooling_trains_on_the_device():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.FractionalMaxPool2d(2, output_ratio=0.7), torch.nn.Flatten()
    ).to("npusim")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 1, 10, 10, device="npusim")
    for _ in range(2):
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
    assert torch.isfinite(loss).item()
