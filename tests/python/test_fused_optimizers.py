"""Adam, AdamW and SGD with fused=True on npusim: one multi-tensor fused kernel per step over every parameter tensor
(torch._fused_adam_ / _fused_adamw_ / _fused_sgd_), against the same optimizers on the CPU. Adam's bias corrections
are computed on the device as exp(step ln beta) in float32 where the CPU takes pow in double, so parameters agree
to float32 rounding."""

import pytest
import torch

import npusim


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(37, 50), torch.nn.ReLU(), torch.nn.Linear(50, 3))


CASES = {
    "AdamW, weight decay": (torch.optim.AdamW, {"weight_decay": 0.05}),
    "Adam, weight decay, amsgrad": (torch.optim.Adam, {"weight_decay": 0.1, "amsgrad": True}),
    "Adam, maximize": (torch.optim.Adam, {"maximize": True}),
    "AdamW, no weight decay": (torch.optim.AdamW, {"weight_decay": 0.0, "betas": (0.8, 0.95)}),
}


@pytest.mark.parametrize("name", CASES)
def test_fused_adam_steps_follow_the_cpu(name, device):
    optimizer_class, options = CASES[name]
    torch.manual_seed(0)
    model, reference = mlp(), mlp()
    reference.load_state_dict(model.state_dict())
    model.to(device)
    optimizer = optimizer_class(model.parameters(), lr=1e-2, fused=True, **options)
    reference_optimizer = optimizer_class(reference.parameters(), lr=1e-2, fused=True, **options)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    reference_schedule = torch.optim.lr_scheduler.StepLR(reference_optimizer, step_size=2, gamma=0.5)
    x, y = torch.randn(8, 37), torch.randint(0, 3, (8,))
    npusim._C.reset_fallback_counts()
    for _ in range(5):
        for net, opt, sched, inputs, targets in (
            (model, optimizer, schedule, x.to(device), y.to(device)),
            (reference, reference_optimizer, reference_schedule, x, y),
        ):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(inputs), targets).backward()
            if net is model:
                with npusim.profile() as report:
                    opt.step()
            else:
                opt.step()
            sched.step()
    assert npusim._C.fallback_counts() == {}
    fused = [k.name for k in report.kernels if k.name.startswith("adam")]
    assert fused == [optimizer_class.__name__.lower() + "_f32"]  # one kernel for the four parameter tensors
    for actual, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-5, atol=2e-6)
    for actual, expected in zip(optimizer.state.values(), reference_optimizer.state.values(), strict=True):
        torch.testing.assert_close(actual["exp_avg"].cpu(), expected["exp_avg"], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(actual["exp_avg_sq"].cpu(), expected["exp_avg_sq"], rtol=1e-5, atol=1e-9)


SGD_CASES = {
    "plain": {},
    "momentum, dampening, weight decay": {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01},
    "nesterov, maximize": {"momentum": 0.8, "nesterov": True, "maximize": True},
}


@pytest.mark.parametrize("name", SGD_CASES)
def test_fused_sgd_steps_follow_the_cpu(name, device):
    torch.manual_seed(0)
    model, reference = mlp(), mlp()
    reference.load_state_dict(model.state_dict())
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, fused=True, **SGD_CASES[name])
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05, fused=True, **SGD_CASES[name])
    x, y = torch.randn(8, 37), torch.randint(0, 3, (8,))
    npusim._C.reset_fallback_counts()
    for _ in range(4):  # the first step sets the momentum buffers, the others update them
        for net, opt, inputs, targets in (
            (model, optimizer, x.to(device), y.to(device)),
            (reference, reference_optimizer, x, y),
        ):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(inputs), targets).backward()
            if net is model:
                with npusim.profile() as report:
                    opt.step()
            else:
                opt.step()
    assert npusim._C.fallback_counts() == {}
    assert [k.name for k in report.kernels if k.name.startswith("sgd")] == ["sgd_f32"]
    for actual, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-6, atol=1e-7)


def test_a_tensor_learning_rate_takes_the_counted_cpu_fallback(device):
    torch.manual_seed(0)
    model, reference = mlp(), mlp()
    reference.load_state_dict(model.state_dict())
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-2), fused=True)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=torch.tensor(1e-2), fused=True)
    x, y = torch.randn(8, 37), torch.randint(0, 3, (8,))
    npusim._C.reset_fallback_counts()
    for net, opt, inputs, targets in (
        (model, optimizer, x.to(device), y.to(device)),
        (reference, reference_optimizer, x, y),
    ):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(inputs), targets).backward()
        opt.step()
    assert npusim._C.fallback_counts() == {"aten::_fused_adamw_.tensor_lr": 1}
    for actual, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(actual.detach().cpu(), expected.detach())
