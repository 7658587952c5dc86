"""Foreach operators (torch._foreach_*) on npusim: one multi-tensor kernel per operator call for the whole list (per
device and dtype), against the CPU's results bit for bit where the CPU computes exactly, for float32, bfloat16 and
float16 lists of tensors of many sizes (empty, one element, transposed); and torch.optim's foreach=True steps against
the same steps on the CPU."""

import os

import pytest
import torch

import npusim

SHAPES = [(0,), (1,), (7,), (64,), (33, 17), (5000,), (3, 4, 5), "transposed"]


def make_list(generator, shape_list, device, dtype, low=None):
    tensors = []
    for shape in shape_list:
        if shape == "transposed":
            t = torch.randn(13, 9, generator=generator).t()
        else:
            t = torch.randn(*shape, generator=generator)
        if low is not None:
            t = t.abs() + low
        tensors.append(t.to(dtype))
    on_device = []
    for t in tensors:
        d = torch.empty_strided(t.size(), t.stride(), dtype=dtype, device=device)
        d.copy_(t)
        on_device.append(d)
    return tensors, on_device


def operands(dtype):
    """The CPU's and the device's lists: a (any), b (any), c (positive), w (weights in [0, 1)) and e (one element)."""
    generator = torch.Generator().manual_seed(0)
    lists = {}
    for name, low in (("a", None), ("b", None), ("c", 0.5), ("w", None)):
        lists[name] = make_list(generator, SHAPES, "npusim", dtype, low)
    w_cpu, w_dev = lists["w"]
    lists["w"] = ([t.abs().fmod(1) for t in w_cpu], [t.abs().fmod(1) for t in w_dev])
    e = torch.tensor(1.75, dtype=dtype)
    lists["e"] = (e, e.to("npusim"))
    return lists


N = len(SHAPES)
SCALARS = [0.1 * (k + 1) - 0.35 for k in range(N)]
WEIGHTS = [0.1, 0.9, 0.3, 0.6, 0.45, 0.55, 0.0, 1.0]

# name: (kernel, call(f, lists)): the call of torch._foreach_<kernel> (or its in-place form) as f.
EXACT = {
    "add.Scalar": ("add", lambda f, o: f(o["a"], 0.37)),
    "add.List": ("add", lambda f, o: f(o["a"], o["b"])),
    "add.List alpha": ("add", lambda f, o: f(o["a"], o["b"], alpha=-0.31)),
    "add.ScalarList": ("add", lambda f, o: f(o["a"], SCALARS)),
    "add.Tensor host": ("add", lambda f, o: f(o["a"], torch.tensor(0.3))),
    "add.Tensor device": ("add", lambda f, o: f(o["a"], o["e"])),
    "sub.Scalar": ("sub", lambda f, o: f(o["a"], 0.37)),
    "sub.List alpha": ("sub", lambda f, o: f(o["a"], o["b"], alpha=0.13)),
    "sub.ScalarList": ("sub", lambda f, o: f(o["a"], SCALARS)),
    "mul.Scalar": ("mul", lambda f, o: f(o["a"], 0.999)),
    "mul.List": ("mul", lambda f, o: f(o["a"], o["b"])),
    "mul.ScalarList": ("mul", lambda f, o: f(o["a"], SCALARS)),
    "mul.Tensor": ("mul", lambda f, o: f(o["a"], o["e"])),
    "div.Scalar": ("div", lambda f, o: f(o["a"], 0.3)),
    "div.List": ("div", lambda f, o: f(o["a"], o["c"])),
    "div.ScalarList": ("div", lambda f, o: f(o["a"], SCALARS)),
    "div.Tensor": ("div", lambda f, o: f(o["a"], o["e"])),
    "addcmul.Scalar": ("addcmul", lambda f, o: f(o["a"], o["b"], o["c"], value=0.3)),
    "addcmul.ScalarList": ("addcmul", lambda f, o: f(o["a"], o["b"], o["c"], SCALARS)),
    "addcmul.Tensor": ("addcmul", lambda f, o: f(o["a"], o["b"], o["c"], torch.tensor(SCALARS))),
    "addcdiv.Scalar": ("addcdiv", lambda f, o: f(o["a"], o["b"], o["c"], value=-0.01)),
    "addcdiv.ScalarList": ("addcdiv", lambda f, o: f(o["a"], o["b"], o["c"], SCALARS)),
    "addcdiv.Tensor": ("addcdiv", lambda f, o: f(o["a"], o["b"], o["c"], torch.tensor(SCALARS))),
    "lerp.Scalar small": ("lerp", lambda f, o: f(o["a"], o["b"], 0.1)),
    "lerp.Scalar large": ("lerp", lambda f, o: f(o["a"], o["b"], 0.9)),
    "lerp.ScalarList": ("lerp", lambda f, o: f(o["a"], o["b"], WEIGHTS)),
    "lerp.List": ("lerp", lambda f, o: f(o["a"], o["b"], o["w"])),
    "neg": ("neg", lambda f, o: f(o["a"])),
    "abs": ("abs", lambda f, o: f(o["a"])),
    "reciprocal": ("reciprocal", lambda f, o: f(o["c"])),
    "maximum.Scalar": ("maximum", lambda f, o: f(o["a"], 0.2)),
    "maximum.List": ("maximum", lambda f, o: f(o["a"], o["b"])),
    "maximum.ScalarList": ("maximum", lambda f, o: f(o["a"], SCALARS)),
    "minimum.Scalar": ("minimum", lambda f, o: f(o["a"], 0.2)),
    "minimum.List": ("minimum", lambda f, o: f(o["a"], o["b"])),
    "minimum.ScalarList": ("minimum", lambda f, o: f(o["a"], SCALARS)),
}
# Within a few ulps of the CPU, not bit for bit: exp and pow are the device's functions, not the CPU's vectorised
# ones; the CPU's float32 sqrt (MKL's) is not correctly rounded, the device's is; and with a one-element other and an
# alpha, the CPU's vectorised loop computes fma(other, alpha, self) but its remainder loop self + (alpha * other)
# rounded, where the device computes the fused multiply-add throughout.
APPROXIMATE = {
    "sqrt": ("sqrt", lambda f, o: f(o["c"])),
    "add.Tensor host alpha": ("add", lambda f, o: f(o["a"], torch.tensor(0.3), alpha=2.5)),
    "add.Tensor device alpha": ("add", lambda f, o: f(o["a"], o["e"], alpha=0.7)),
    "exp": ("exp", lambda f, o: f(o["a"])),
    "pow.ScalarAndTensor": ("pow", lambda f, o: f(0.9, o["c"])),
}
FLOAT32_ONLY = {
    "pow.Scalar 2": ("pow", lambda f, o: f(o["a"], 2)),
    "pow.Scalar -0.5": ("pow", lambda f, o: f(o["c"], -0.5)),
}
IN_PLACE_ONLY = {
    "zero_": ("zero", lambda f, o: f(o["a"])),
    "copy_": ("copy", lambda f, o: f(o["a"], o["b"])),
}


def in_place(op):
    """torch._foreach_<op>_, returning its (updated) self list like the out-of-place form returns its results."""
    function = getattr(torch, f"_foreach_{op}_")
    return lambda *args, **kwargs: (function(*args, **kwargs), args[0])[1]


def cases(table, kind, with_in_place=True):
    for name, (kernel, call) in table.items():
        function = getattr(torch, f"_foreach_{kernel}") if with_in_place else in_place(kernel)
        yield name, kernel, (call, function), kind
        if with_in_place and name != "pow.ScalarAndTensor":
            in_place_name = name.replace(".", "_.", 1) if "." in name else name + "_"
            yield in_place_name, kernel, (call, in_place(kernel)), kind


ALL = [
    *cases(EXACT, "exact"),
    *cases(APPROXIMATE, "approximate"),
    *cases(FLOAT32_ONLY, "float32"),
    *cases(IN_PLACE_ONLY, "exact", with_in_place=False),
]
SUFFIX = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def lists_for(dtype, on_device):
    return {name: pair[1 if on_device else 0] for name, pair in operands(dtype).items()}


def reference(call, function, dtype):
    """The CPU's results; for half precision, PyTorch's opmath model: the float32 operation on the widened values,
    rounded once to the type. (The CPU's own half-precision kernels round a scalar operand to the tensor's type first
    in some paths, sub and add with scalars among them, and so differ from it in a few elements.)"""
    lists = lists_for(dtype, False)
    if dtype == torch.float32:
        return call(function, lists)
    widened = {
        name: [t.float() for t in value] if isinstance(value, list) else value.float() for name, value in lists.items()
    }
    return [t.to(dtype) for t in call(function, widened)]


# A few ulps of each type, relative, for the approximate cases.
RELATIVE_ULPS = {torch.float32: 4e-6, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["f32", "bf16", "f16"])
@pytest.mark.parametrize("name,kernel,call,kind", ALL, ids=[case[0] for case in ALL])
def test_foreach_matches_the_cpu_in_one_kernel(name, kernel, call, kind, dtype, monkeypatch):
    if dtype != torch.float32 and kind == "float32":
        pytest.skip("float32 only: half-precision powers use the CPU's pow")
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    call, function = call
    expected = reference(call, function, dtype)
    device_lists = lists_for(dtype, True)
    torch.npusim.synchronize()
    with npusim.profile() as report:
        actual = call(function, device_lists)
    assert report.fallbacks == {}
    assert [k.name for k in report.kernels] == [f"foreach_{kernel}_{SUFFIX[dtype]}"]
    for a, e in zip(actual, expected, strict=True):
        assert a.device.type == "npusim" and a.dtype == e.dtype and a.shape == e.shape
        if kind == "approximate":
            torch.testing.assert_close(a.cpu(), e, rtol=RELATIVE_ULPS[dtype], atol=1e-30)
        else:
            torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0, equal_nan=True)
            assert torch.equal(a.cpu().signbit(), e.signbit())


def test_mixed_dtypes_are_one_kernel_per_dtype_and_other_tensors_run_one_by_one(device):
    # float32 and bfloat16 tensors: one kernel each; a strided slice (not dense) and an int64 tensor: their own ops.
    generator = torch.Generator().manual_seed(1)
    cpu = [
        torch.randn(100, generator=generator),
        torch.randn(30, generator=generator).bfloat16(),
        torch.randn(50, generator=generator),
        torch.randn(40, generator=generator).bfloat16(),
    ]
    base = torch.randn(20, generator=generator)
    dev = [t.to(device) for t in cpu]
    dev_base = base.to(device)
    cpu.append(base[::2])
    dev.append(dev_base[::2])
    cpu.append(torch.arange(6))
    dev.append(torch.arange(6, device=device))
    expected = torch._foreach_add(cpu, 3)
    with npusim.profile() as report:
        actual = torch._foreach_add(dev, 3)
    names = [k.name for k in report.kernels]
    assert names.count("foreach_add_f32") == 1 and names.count("foreach_add_bf16") == 1
    assert report.fallbacks == {}
    for a, e in zip(actual, expected, strict=True):
        assert torch.equal(a.cpu(), e)


def test_an_unsupported_dtype_falls_back_per_tensor_counted(device):
    cpu = [torch.randn(5, dtype=torch.float64), torch.randn(3, dtype=torch.float64)]
    dev = [t.to(device) for t in cpu]
    npusim._C.reset_fallback_counts()
    torch._foreach_mul_(dev, 1.5)
    torch._foreach_mul_(cpu, 1.5)
    assert all(torch.equal(a.cpu(), e) for a, e in zip(dev, cpu, strict=True))
    assert sum(npusim._C.fallback_counts().values()) >= 1


def test_partially_overlapping_operands_are_refused_as_on_the_cpu(device):
    # other[0] is self[0] shifted by one element: no kernel runs over it; the per-tensor path refuses it as the CPU
    # does.
    base = torch.randn(101)
    with pytest.raises(RuntimeError, match="single memory location"):
        torch._foreach_add_([base[:100]], [base[1:]])
    on_device = base.to(device)
    with pytest.raises(RuntimeError, match="single memory location"):
        torch._foreach_add_([on_device[:100]], [on_device[1:]])
    assert torch.equal(on_device.cpu(), base)


SIZES = [(50, 37), (50,), (61, 50), (61,), (3, 61), (3,), (1,), (4097,)]

OPTIMIZERS = {
    "AdamW": (torch.optim.AdamW, {"weight_decay": 0.05}, 8),
    "Adam amsgrad": (torch.optim.Adam, {"amsgrad": True, "weight_decay": 0.1}, 9),
    "Adam maximize": (torch.optim.Adam, {"maximize": True}, 8),
    "SGD momentum nesterov": (torch.optim.SGD, {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, 5),
    "SGD momentum dampening": (torch.optim.SGD, {"momentum": 0.8, "dampening": 0.1}, 3),
    "SGD": (torch.optim.SGD, {}, 1),
    "RMSprop centered momentum": (torch.optim.RMSprop, {"centered": True, "momentum": 0.5, "weight_decay": 0.01}, None),
    "Adagrad": (torch.optim.Adagrad, {"lr_decay": 0.01, "weight_decay": 0.01}, None),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_foreach_optimizer_steps_follow_the_cpu(name, device, monkeypatch, tmp_path):
    """The same parameters and gradients on both sides, four steps with a learning-rate schedule: one kernel per
    foreach call, none built after the second step (new bias corrections and step sizes are launch arguments)."""
    optimizer_class, options, kernels_per_step = OPTIMIZERS[name]
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    generator = torch.Generator().manual_seed(list(OPTIMIZERS).index(name))
    extra = list(OPTIMIZERS).index(name) + 2  # sizes of its own, so that its first step builds its kernels
    sizes = [*SIZES, (extra,)]
    reference = [torch.randn(size, generator=generator).requires_grad_() for size in sizes]
    params = [p.detach().to(device).requires_grad_() for p in reference]
    lr = 1e-2 if optimizer_class is not torch.optim.SGD else 0.05
    optimizer = optimizer_class(params, lr=lr, foreach=True, **options)
    reference_optimizer = optimizer_class(reference, lr=lr, foreach=True, **options)
    schedules = [torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.7) for o in (optimizer, reference_optimizer)]
    dumps = tmp_path / "kernels"
    monkeypatch.setenv("NPUSIM_DUMP_KERNELS", str(dumps))
    built = []
    for _ in range(4):
        for p, r in zip(params, reference, strict=True):
            r.grad = torch.randn(r.shape, generator=generator)
            p.grad = r.grad.to(device)
        before = set(os.listdir(dumps)) if dumps.exists() else set()
        with npusim.profile() as report:
            optimizer.step()
        built.append({kernel for kernel in set(os.listdir(dumps)) - before if kernel.startswith("foreach")})
        reference_optimizer.step()
        for schedule in schedules:
            schedule.step()
    assert report.fallbacks == {}
    names = [k.name for k in report.kernels]
    assert all(n.startswith("foreach_") for n in names), names
    if kernels_per_step is not None:
        assert len(names) == kernels_per_step, names
    assert built[0] and built[2] == set() and built[3] == set(), built
    # Bit for bit where the step takes no square root: the CPU's float32 sqrt (MKL's) is not correctly rounded (about
    # a fifth of its results are an ulp off), the device's is.
    exact = optimizer_class is torch.optim.SGD
    for actual, expected in zip(params, reference, strict=True):
        if exact:
            assert torch.equal(actual.detach().cpu(), expected.detach()), name
        else:
            torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=2e-6, atol=1e-7)
    for actual, expected in zip(optimizer.state.values(), reference_optimizer.state.values(), strict=True):
        for key, value in expected.items():
            if key != "step":
                torch.testing.assert_close(
                    actual[key].cpu(), value, rtol=0 if exact else 2e-5, atol=0 if exact else 1e-6
                )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("ord", [2, 1, float("inf")], ids=["l2", "l1", "inf"])
def test_foreach_norm_is_one_kernel_per_call_and_matches_cpu(ord, dtype, device):
    """clip_grad_norm_'s foreach path: every tensor's norm in one kernel, long tensors walked in chunks; an empty
    tensor's norm is 0 (and its infinity norm an error, as on the CPU)."""
    generator = torch.Generator().manual_seed(3)
    shapes = [s for s in SHAPES if ord != float("inf") or s != (0,)] + [(300_000,)]
    cpu, on_device = make_list(generator, shapes, device, dtype)
    with npusim.profile() as report:
        norms = torch._foreach_norm(on_device, ord)
        torch.npusim.synchronize()
    assert report.fallbacks == {}
    suffix = {2: "", 1: "1", float("inf"): "_inf"}[ord]
    type_name = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}[dtype]
    assert [r.name for r in report.kernels] == [f"foreach_norm{suffix}_{type_name}"]
    # Float32 sums in another order than the CPU's; half precision results rounded once from them.
    tolerance = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {}
    for got, want in zip(norms, torch._foreach_norm(cpu, ord), strict=True):
        assert got.device.type == "npusim" and got.dtype == want.dtype and got.dim() == 0
        torch.testing.assert_close(got.cpu(), want, **tolerance)
    if ord == float("inf"):
        with pytest.raises(RuntimeError, match="infinity norm on an empty tensor"):
            torch._foreach_norm([torch.zeros(0, device=device)], ord)


def test_foreach_norm_in_float32_of_half_tensors_and_of_other_orders(device):
    generator = torch.Generator().manual_seed(4)
    cpu, on_device = make_list(generator, SHAPES, device, torch.bfloat16)
    wide = torch._foreach_norm(on_device, 2, dtype=torch.float32)
    for got, want in zip(wide, torch._foreach_norm(cpu, 2, dtype=torch.float32), strict=True):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)
    # An order the kernel does not take runs per tensor through the native vector norms.
    with npusim.profile() as report:
        cubic = torch._foreach_norm(on_device[:3], 3)
    assert report.fallbacks == {}
    for got, want in zip(cubic, torch._foreach_norm(cpu[:3], 3), strict=True):
        torch.testing.assert_close(got.cpu(), want)


def test_clip_grad_norm_with_foreach_matches_cpu(device):
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(50, 40), torch.nn.Tanh(), torch.nn.Linear(40, 3))
    reference = torch.nn.Sequential(torch.nn.Linear(50, 40), torch.nn.Tanh(), torch.nn.Linear(40, 3))
    reference.load_state_dict(model.state_dict())
    model.to(device)
    x = torch.randn(8, 50)
    model(x.to(device)).square().sum().backward()
    reference(x).square().sum().backward()
    with npusim.profile() as report:
        total = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=True)
    expected = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5, foreach=True)
    assert report.fallbacks == {}
    assert [r.name for r in report.kernels].count("foreach_norm_f32") == 1
    torch.testing.assert_close(total.cpu(), expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-5, atol=1e-6)
