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


def test_other_dims_gather_elements_natively(device):
    table = torch.arange(24.0).reshape(2, 3, 4)
    index = torch.tensor([3, 1, 3])
    with npusim.profile() as report:
        result = torch.index_select(table.to(device), 2, index.to(device))
    assert report.fallbacks == {}
    assert [r.name for r in report.kernels] == ["gather_f32"]
    assert torch.equal(result.cpu(), table[:, :, [3, 1, 3]])
    with pytest.raises(IndexError, match="index out of range in self"):
        torch.index_select(table.to(device), 1, torch.tensor([-1]).to(device))


def test_embedding_backward_accumulates_repeated_indices_natively(device):
    table = torch.randn(10, 6, generator=torch.Generator().manual_seed(40))
    indices = torch.tensor([[1, 3, 3], [9, 1, 0]])
    for padding_idx in (None, 3):
        embedding = torch.nn.Embedding(10, 6, padding_idx=padding_idx)
        with torch.no_grad():
            embedding.weight.copy_(table)
        embedding_device = torch.nn.Embedding(10, 6, padding_idx=padding_idx).to(device)
        embedding_device.load_state_dict(embedding.state_dict())
        grad = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(41))
        embedding(indices).backward(grad)
        with npusim.profile() as report:
            embedding_device(indices.to(device)).backward(grad.to(device))
        assert report.fallbacks == {}
        assert "scatter_add_rows_f32" in {k.name for k in report.kernels}
        torch.testing.assert_close(embedding_device.weight.grad.cpu(), embedding.weight.grad)


def test_embedding_backward_with_an_index_outside_the_table_is_an_index_error(device):
    grad = torch.ones(3, 4).to(device)
    with pytest.raises(IndexError, match="embedding's backward"):
        torch.ops.aten.embedding_dense_backward(grad, torch.tensor([0, 7, 1]).to(device), 5, -1, False)
    result = torch.ops.aten.embedding_dense_backward(grad, torch.tensor([0, 4, 0]).to(device), 5, -1, False)
    assert result.cpu()[0].tolist() == [2.0] * 4 and result.cpu()[4].tolist() == [1.0] * 4


# Both kernels move elements along dimension 1 and differ only in whether a negative index wraps; a cache keyed by
# anything less than the whole spec gave the second one the first one's program. Each order runs in a fresh process,
# where the cache starts empty.
@pytest.mark.parametrize("advanced_indexing_first", [False, True])
def test_index_select_and_advanced_indexing_keep_their_own_negative_index_rules(advanced_indexing_first):
    from conftest import run_python

    result = run_python(
        f"""
        import torch, npusim
        x = torch.arange(12.0).reshape(3, 4)
        negative = torch.tensor([0, -1, 2])

        def index_select():
            try:
                torch.index_select(x.to("npusim"), 1, negative.to("npusim")).cpu()
            except (IndexError, RuntimeError):  # as on the CPU, which raises a RuntimeError here
                return "raises"
            return "no error"

        def advanced_indexing():
            return torch.equal(x.to("npusim")[:, negative.to("npusim")].cpu(), x[:, negative])

        if {advanced_indexing_first}:
            print(advanced_indexing(), index_select())
        else:
            print(index_select(), advanced_indexing())
        """,
        NPUSIM_FALLBACK="error",
    )
    assert result.returncode == 0, result.stderr
    expected = "True raises" if advanced_indexing_first else "raises True"
    assert result.stdout.split() == expected.split()


def test_index_select_of_a_zero_dim_tensor(device):
    npusim._C.reset_fallback_counts()
    x = torch.tensor(3.5)
    for index in (torch.tensor([0]), torch.tensor(0)):
        result = torch.index_select(x.to(device), 0, index.to(device))
        assert result.shape == torch.index_select(x, 0, index).shape
        assert result.item() == 3.5
    assert npusim._C.fallback_counts() == {}
    with pytest.raises(IndexError):
        torch.index_select(x.to(device), 0, torch.tensor([1]).to(device))
