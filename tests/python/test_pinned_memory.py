"""Pinned host memory with npusim as the accelerator: pin_memory=True, Tensor.pin_memory() and DataLoader's
pin_memory, as a CUDA user writes them (without them, PyTorch refuses pinning once a PrivateUse1 device exists)."""

import torch
from torch.utils.data import DataLoader, TensorDataset


def test_pinned_tensors_are_pinned_and_copy_both_ways(device):
    pinned = torch.arange(1000.0, pin_memory=True)
    assert pinned.is_pinned() and pinned[10:].is_pinned()  # a view into the block as well
    assert not torch.arange(4.0).is_pinned()
    on_device = pinned.to(device, non_blocking=True)
    back = torch.empty(1000, pin_memory=True)
    back.copy_(on_device, non_blocking=True)
    torch.npusim.synchronize()
    assert torch.equal(back, torch.arange(1000.0))
    repinned = torch.randn(3, 5).pin_memory()
    assert repinned.is_pinned() and torch.equal(repinned.to(device).cpu(), repinned)


def test_data_loader_with_pin_memory_feeds_a_training_step(device):
    data = TensorDataset(torch.randn(32, 6), torch.randint(0, 3, (32,)))
    loader = DataLoader(data, batch_size=8, pin_memory=True)
    model = torch.nn.Linear(6, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in loader:
        assert inputs.is_pinned() and targets.is_pinned()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs.to(device, non_blocking=True)), targets.to(device))
        loss.backward()
        optimizer.step()
    assert torch.isfinite(loss.cpu())
