"""exponential_, geometric_, cauchy_, log_normal_ and normal with tensor parameters on npusim: drawn from the
device generator and transformed on the device (no CPU fallback), reproducible under a seed, and distributed as
they should be: the sample moments (or quantiles, for the Cauchy distribution, which has none) of 200,000 draws
against the distribution's own, within a few standard errors."""

import math

import pytest
import torch

COUNT = 200_000


def draws(device, sample, dtype=torch.float32):
    torch.manual_seed(5)
    first = sample(torch.empty(COUNT, device=device, dtype=dtype)).cpu()
    torch.manual_seed(5)
    again = sample(torch.empty(COUNT, device=device, dtype=dtype)).cpu()
    assert torch.equal(first, again), "the same seed gives the same numbers"
    return first.double()


def assert_mean(samples, mean, std):
    standard_error = std / math.sqrt(len(samples))
    assert abs(samples.mean().item() - mean) < 5 * standard_error


def test_exponential(device, no_fallback):
    samples = draws(device, lambda t: t.exponential_(2.0))
    assert samples.min() >= 0
    assert_mean(samples, 0.5, 0.5)
    assert abs(samples.std().item() - 0.5) < 0.01


def test_geometric(device, no_fallback):
    p = 0.3
    samples = draws(device, lambda t: t.geometric_(p))
    assert samples.min() >= 1 and torch.equal(samples, samples.round())
    assert_mean(samples, 1 / p, math.sqrt(1 - p) / p)


def test_cauchy(device, no_fallback):
    samples = draws(device, lambda t: t.cauchy_(1.0, 2.0))
    # quartiles of a Cauchy(median, sigma): median -+ sigma
    quartiles = torch.quantile(samples[:100_000].float(), torch.tensor([0.25, 0.5, 0.75])).tolist()
    assert quartiles == pytest.approx([-1.0, 1.0, 3.0], abs=0.05)


def test_log_normal(device, no_fallback):
    samples = draws(device, lambda t: t.log_normal_(0.5, 0.25))
    assert samples.min() > 0
    logs = samples.log()
    assert_mean(logs, 0.5, 0.25)
    assert abs(logs.std().item() - 0.25) < 0.005


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_draws_round_once(dtype, device, no_fallback):
    samples = draws(device, lambda t: t.exponential_(1.0), dtype)
    assert samples.min() >= 0
    assert_mean(samples, 1.0, 1.0)


def test_normal_with_tensor_parameters_broadcasts(device, no_fallback):
    mean = torch.tensor([[-10.0], [0.0], [10.0]])
    std = torch.tensor([0.5, 1.0, 2.0, 4.0])
    torch.manual_seed(3)
    samples = torch.normal(mean.to(device), std.to(device).expand(20_000, 3, 4).contiguous()).cpu()
    assert samples.shape == (20_000, 3, 4)
    torch.testing.assert_close(samples.mean(0), mean.expand(3, 4), atol=0.15, rtol=0)
    torch.testing.assert_close(samples.std(0), std.expand(3, 4), atol=0, rtol=0.05)
    out = torch.empty(0, device=device)
    torch.normal(mean.to(device), 2.0, out=out)
    assert out.shape == (3, 1)
    assert torch.normal(1.0, std.to(device)).shape == (4,)


def test_bad_parameters_raise_as_on_the_cpu(device):
    for where in (device, "cpu"):
        t = torch.empty(3, device=where)
        with pytest.raises(RuntimeError, match="lambda > 0"):
            t.exponential_(-1.0)
        with pytest.raises(RuntimeError, match=r"p to be in \(0, 1\)"):
            t.geometric_(1.5)
        with pytest.raises(RuntimeError, match="std >= 0"):
            torch.normal(t, torch.full((3,), -1.0, device=where))
