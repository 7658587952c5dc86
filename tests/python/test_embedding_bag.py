"""nn.EmbeddingBag / F.embedding_bag on npusim against the CPU: sum, mean and max bags, per-sample weights,
padding_idx, include_last_offset, empty bags, 2-D inputs, scale_grad_by_freq, the gradients of the weight and the
per-sample weights, and a recommendation model's training steps, with no CPU fallback."""

import pytest
import torch
import torch.nn.functional as F
from conftest import train_side_by_side

TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def generator(seed=0):
    return torch.Generator().manual_seed(seed)


def run(where, weight, indices, offsets=None, per_sample_weights=None, **options):
    """The bags and the gradients of the weight (and of the per-sample weights, when given) on `where`."""
    w = weight.detach().to(where).requires_grad_()
    psw = None if per_sample_weights is None else per_sample_weights.detach().to(where).requires_grad_()
    moved_offsets = None if offsets is None else offsets.to(where)
    out = F.embedding_bag(indices.to(where), w, moved_offsets, per_sample_weights=psw, **options)
    out.backward(torch.randn(out.shape, generator=generator(9)).to(where))
    return out.detach().cpu(), w.grad.cpu(), None if psw is None else psw.grad.cpu()


def assert_same_as_cpu(device, *args, **options):
    for actual, expected in zip(run(device, *args, **options), run("cpu", *args, **options), strict=True):
        if expected is None:
            assert actual is None
        else:
            torch.testing.assert_close(actual, expected, **TOLERANCE)


WEIGHT = torch.randn(10, 6, generator=generator(1))
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 4, 4, 7])
OFFSETS = torch.tensor([0, 3, 3, 7, 8])  # the second bag is empty


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4], ids=["no padding", "padding_idx"])
@pytest.mark.parametrize("include_last_offset", [False, True], ids=["", "last offset"])
def test_bags_and_their_gradients_match_the_cpu(device, no_fallback, mode, padding_idx, include_last_offset):
    offsets = torch.cat([OFFSETS, torch.tensor([12])]) if include_last_offset else OFFSETS
    assert_same_as_cpu(
        device, WEIGHT, INDICES, offsets, mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset
    )


@pytest.mark.parametrize("padding_idx", [None, 2], ids=["no padding", "padding_idx"])
def test_per_sample_weights_and_their_gradient_match_the_cpu(device, no_fallback, padding_idx):
    weights = torch.rand(INDICES.shape, generator=generator(2))
    assert_same_as_cpu(device, WEIGHT, INDICES, OFFSETS, weights, mode="sum", padding_idx=padding_idx)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_two_dimensional_inputs_are_bags_of_their_rows(device, no_fallback, mode):
    indices = torch.randint(0, 10, (4, 3), generator=generator(3))
    assert_same_as_cpu(device, WEIGHT, indices, mode=mode)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq_divides_by_each_indexs_count(device, no_fallback, mode):
    # PyTorch 2.13's CPU embedding_bag divides by another index's count where counts differ (pytorch/pytorch#190063,
    # fixed after 2.13; CUDA and MPS divide by the index's own). The reference is the CPU's nn.Embedding, which
    # scales correctly, with the bags summed (or averaged) around it.
    def reference_bags(weight, indices, offsets):
        rows = F.embedding(indices, weight, scale_grad_by_freq=True)
        bag = torch.bucketize(torch.arange(len(indices)), offsets[1:], right=True)
        sums = torch.zeros(len(offsets), weight.shape[1]).index_add(0, bag, rows)
        sizes = torch.bincount(bag, minlength=len(offsets)).clamp(min=1).unsqueeze(1)
        return sums / sizes if mode == "mean" else sums

    outputs, gradients = [], []  # the reference's, then the device's
    for where, bags in (("cpu", reference_bags), (device, None)):
        w = WEIGHT.detach().to(where).requires_grad_()
        if bags is None:
            out = F.embedding_bag(INDICES.to(where), w, OFFSETS.to(where), mode=mode, scale_grad_by_freq=True)
        else:
            out = bags(w, INDICES, OFFSETS)
        out.backward(torch.randn(out.shape, generator=generator(9)).to(where))
        outputs.append(out.detach().cpu())
        gradients.append(w.grad.cpu())
    torch.testing.assert_close(outputs[1], outputs[0], **TOLERANCE)
    torch.testing.assert_close(gradients[1], gradients[0], **TOLERANCE)


def test_max_picks_the_first_of_tied_maxima_as_the_cpu_does(device, no_fallback):
    weight = torch.tensor([[1.0, 5.0], [1.0, 2.0], [3.0, 5.0]])
    indices, offsets = torch.tensor([0, 1, 2, 1, 0]), torch.tensor([0, 2])
    assert_same_as_cpu(device, weight, indices, offsets, mode="max")
    _, _, _, max_indices = torch.ops.aten._embedding_bag(
        weight.to(device), indices.to(device), offsets.to(device), False, 2
    )
    expected = torch.ops.aten._embedding_bag(weight, indices, offsets, False, 2)[3]
    assert torch.equal(max_indices.cpu(), expected)


@pytest.mark.parametrize("norm_type", [1.0, 2.0])
def test_max_norm_renormalises_the_rows_it_uses_in_place(device, no_fallback, norm_type):
    weight = torch.randn(10, 6, generator=generator(7)) * 2
    on_device = weight.to(device)
    out = F.embedding_bag(INDICES.to(device), on_device, OFFSETS.to(device), max_norm=1.5, norm_type=norm_type)
    expected = F.embedding_bag(INDICES, weight, OFFSETS, max_norm=1.5, norm_type=norm_type)
    torch.testing.assert_close(out.cpu(), expected, **TOLERANCE)
    torch.testing.assert_close(on_device.cpu(), weight, **TOLERANCE)  # the same rows renormalised, the rest untouched


def test_int32_indices_and_no_grad_forward(device, no_fallback):
    with torch.no_grad():  # aten::_embedding_bag_forward_only
        actual = F.embedding_bag(INDICES.int().to(device), WEIGHT.to(device), OFFSETS.int().to(device), mode="mean")
    torch.testing.assert_close(actual.cpu(), F.embedding_bag(INDICES, WEIGHT, OFFSETS, mode="mean"), **TOLERANCE)


def test_a_recommendation_model_trains_like_on_the_cpu(no_fallback):
    class TwoTower(torch.nn.Module):  # sparse features pooled by bags, then a small MLP, as DLRM-style models do
        def __init__(self):
            super().__init__()
            self.users = torch.nn.EmbeddingBag(50, 8, mode="sum")
            self.items = torch.nn.EmbeddingBag(40, 8, mode="mean")
            self.top = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))

        def forward(self, batch):
            user_ids, user_offsets, item_ids, item_offsets = batch
            pooled = torch.cat([self.users(user_ids, user_offsets), self.items(item_ids, item_offsets)], dim=1)
            return self.top(pooled).squeeze(1)

    torch.manual_seed(0)
    reference = TwoTower()
    model = TwoTower()
    model.load_state_dict(reference.state_dict())
    model.to("npusim")

    class Batch(tuple):  # moves as one input
        def to(self, where):
            return Batch(t.to(where) for t in self)

    batch = Batch(
        (
            torch.randint(0, 50, (20,), generator=generator(4)),
            torch.tensor([0, 5, 9, 14]),
            torch.randint(0, 40, (12,), generator=generator(5)),
            torch.tensor([0, 2, 7, 7]),
        )
    )
    targets = torch.rand(4, generator=generator(6))
    losses, expected_losses, _ = train_side_by_side(
        model, reference, torch.optim.Adagrad(model.parameters(), lr=0.1),
        torch.optim.Adagrad(reference.parameters(), lr=0.1), lambda net, x, y: F.mse_loss(net(x), y), batch, targets,
        steps=4,
    )  # fmt: skip
    torch.testing.assert_close(losses, expected_losses, rtol=1e-4, atol=1e-6)
    assert losses[-1] < losses[0]


def test_sparse_gradients_are_refused_clearly_and_the_device_stays_usable(device):
    weight = WEIGHT.to(device).requires_grad_()
    out = F.embedding_bag(INDICES.to(device), weight, OFFSETS.to(device), sparse=True)
    with pytest.raises(RuntimeError, match="sparse=True is not supported"):
        out.sum().backward()
    dense = F.embedding_bag(INDICES.to(device), weight, OFFSETS.to(device))
    torch.testing.assert_close(dense.cpu(), F.embedding_bag(INDICES, WEIGHT, OFFSETS), **TOLERANCE)
