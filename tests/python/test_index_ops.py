"""index_select along dim 0 and nn.Embedding on npusim against the CPU: a row-gather kernel, for any dtype."""

import pytest
import torch

import npusim


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int8, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_index_select_rows_matches_cpu(dtype, index_dtype, device):
    table = (torch.arange(60) * 3 - 50).reshape(10, 2, 3).to(dtype)
    index = torch.tensor([9, 0, 3, 3, 7], dtype=index_dtype)
    with npusim.profile() as report:
        result = torch.index_select(table.to(device), 0, index.to(device))
    assert report.fallbacks == {}
    assert [r.name for r in report.kernels] == ["gather_rows"]
    assert torch.equal(result.cpu(), torch.index_select(table, 0, index))


def test_embedding_lookup_matches_cpu_without_fallback(device):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(50, 16)
    tokens = torch.tensor([[1, 5, 49], [0, 0, 7]])
    expected = embedding(tokens)
    embedding.to(device)
    with npusim.profile() as report, torch.no_grad():
        result = embedding(tokens.to(device))
    assert report.fallbacks == {}
    torch.testing.assert_close(result.cpu(), expected.detach(), rtol=0, atol=0)


def test_out_of_range_index_is_an_index_error_and_the_device_stays_usable(device):
    table = torch.ones(4, 3).to(device)
    for bad in (4, -1):
        with pytest.raises(IndexError, match="index out of range in self"):
            torch.index_select(table, 0, torch.tensor([0, bad]).to(device))
    assert torch.equal(torch.index_select(table, 0, torch.tensor([2]).to(device)).cpu(), torch.ones(1, 3))


def test_other_dims_take_the_cpu_fallback(device):
    table = torch.arange(12.0).reshape(3, 4)
    index = torch.tensor([3, 1])
    assert torch.equal(torch.index_select(table.to(device), 1, index.to(device)).cpu(), table[:, [3, 1]])
