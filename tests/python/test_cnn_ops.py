"""Convolution, batch normalisation, average and max pooling, upsampling, reflection and replication padding, weight
normalisation and multi-dimension reductions on npusim against the CPU, and a ResNet-style CNN's training steps: all as
emitted kernels, with no CPU fallback."""

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from conftest import run_python, train_side_by_side

import npusim

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def random(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def forward_and_backward(function, inputs, device, seed=99):
    """function(*inputs) and the gradients of every input, on the device and on the CPU."""
    results = []
    for where in (device, "cpu"):
        leaves = [t.detach().to(where).requires_grad_() for t in inputs]
        with npusim.profile() as report:
            out = function(*leaves)
            out.backward(random(*out.shape, seed=seed).to(where))
        results.append((out.detach().cpu(), [leaf.grad.cpu() for leaf in leaves], report))
    (out, grads, report), (expected, expected_grads, _) = results
    return out, grads, expected, expected_grads, report


CONVOLUTIONS = [
    ("3x3 padded", (2, 3, 9, 8), (4, 3, 3, 3), {"padding": 1}),
    (
        "strided, dilated, grouped",
        (1, 4, 10, 10),
        (6, 2, 3, 2),
        {"stride": 2, "padding": (1, 0), "dilation": (2, 1), "groups": 2},
    ),
    ("depthwise", (2, 6, 7, 7), (6, 1, 3, 3), {"padding": 1, "groups": 6}),
    ("1-D", (3, 5, 12), (7, 5, 4), {"stride": 2, "padding": 3}),
    # ungrouped kernels run channels-last as one GEMM; 1 x 1 kernels per sample
    ("strided, dilated", (2, 5, 11, 10), (4, 5, 3, 2), {"stride": (2, 1), "padding": (2, 1), "dilation": (1, 2)}),
    ("1x1 strided", (2, 8, 9, 9), (6, 8, 1, 1), {"stride": 2}),
    # stride 1: the input gradient is a convolution of the output gradient (padding d (k - 1) - p), or for 1 x 1
    # kernels a product per sample; padding beyond d (k - 1) takes col2im
    ("3x3 dilated, stride 1", (1, 4, 10, 9), (5, 4, 3, 3), {"padding": 2, "dilation": 2}),
    ("1x3, stride 1", (2, 4, 7, 9), (6, 4, 1, 3), {"padding": (0, 1)}),
    ("3x3 padded beyond the kernel", (2, 4, 8, 8), (6, 4, 3, 3), {"padding": 3}),
    ("1x1", (2, 8, 6, 7), (6, 8, 1, 1), {}),
    ("1x1 grouped", (2, 8, 6, 7), (8, 2, 1, 1), {"groups": 4}),
    ("1x1 padded and strided", (3, 5, 7, 6), (4, 5, 1, 1), {"stride": 2, "padding": 1}),
]


@pytest.mark.parametrize("name, input_shape, weight_shape, options", CONVOLUTIONS, ids=[c[0] for c in CONVOLUTIONS])
def test_convolution_and_its_gradients_run_natively_and_match_cpu(name, input_shape, weight_shape, options, device):
    conv = F.conv1d if len(input_shape) == 3 else F.conv2d
    inputs = (random(*input_shape, seed=1), random(*weight_shape, seed=2), random(weight_shape[0], seed=3))
    out, grads, expected, expected_grads, report = forward_and_backward(
        lambda x, w, b: conv(x, w, b, **options), inputs, device
    )
    assert report.fallbacks == {}
    assert "matmul_f32" in {k.name for k in report.kernels}
    torch.testing.assert_close(out, expected, **TOLERANCE)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


@pytest.mark.parametrize("kernel_size, padding", [(3, 1), (1, 0)])
def test_stride_one_input_gradients_need_no_col2im_adds(kernel_size, padding, device):
    """A stride-1 layer's input gradient is computed as a convolution (3x3) or a batched product (1x1), not as
    patch gradients added up one kernel offset at a time."""
    x = random(2, 8, 10, 10, seed=1).to(device).requires_grad_()
    weight = random(8, 8, kernel_size, kernel_size, seed=2).to(device).requires_grad_()
    y = F.conv2d(x, weight, padding=padding)
    with npusim.profile() as report:
        y.backward(random(*y.shape, seed=3).to(device))
    names = [k.name for k in report.kernels if k.op == "aten::convolution_backward"]
    assert "add_f32" not in names
    assert names.count("matmul_f32") == 2  # the input's and the weights' gradients, each one launch for the batch
    expected_x, expected_weight = x.detach().cpu().requires_grad_(), weight.detach().cpu().requires_grad_()
    F.conv2d(expected_x, expected_weight, padding=padding).backward(random(*y.shape, seed=3))
    torch.testing.assert_close(x.grad.cpu(), expected_x.grad, **TOLERANCE)
    torch.testing.assert_close(weight.grad.cpu(), expected_weight.grad, **TOLERANCE)


# Stride 1 with kernel rows of whole K steps (KW x C a multiple of the default chip's 16 array rows): an implicit
# GEMM, the patches read where they lie in the padded input (conv_f32), for the output and for the input's gradient,
# which is the convolution of the output's gradient (O channels; padding d (k - 1) - p). The weights' gradient too when
# an image's wide positions (OH x Wp) are whole K steps and KW x C at least 128: the last number, conv_f32 kernels in
# the backward.
IMPLICIT_GEMM_CONVOLUTIONS = [
    ("3x3 padded", (2, 16, 20, 20), (16, 16, 3, 3), {"padding": 1}, 1),
    ("3x3 padded, weight gradient too", (2, 48, 16, 14), (16, 48, 3, 3), {"padding": 1}, 2),
    ("3x5, rows dilated, padded unevenly", (2, 16, 18, 21), (16, 16, 3, 5), {"padding": (2, 1), "dilation": (2, 1)}, 1),
    ("1-D", (3, 16, 40), (16, 16, 3), {"padding": 1}, 1),
    ("1-D, weight gradient too", (3, 48, 46), (32, 48, 3), {"padding": 1}, 2),
]


@pytest.mark.parametrize(
    "name, input_shape, weight_shape, options, in_backward",
    IMPLICIT_GEMM_CONVOLUTIONS,
    ids=[c[0] for c in IMPLICIT_GEMM_CONVOLUTIONS],
)
def test_stride_one_convolutions_read_their_patches_in_place(
    name, input_shape, weight_shape, options, in_backward, device
):
    conv = F.conv1d if len(input_shape) == 3 else F.conv2d
    inputs = (random(*input_shape, seed=7), random(*weight_shape, seed=8), random(weight_shape[0], seed=9))
    out, grads, expected, expected_grads, report = forward_and_backward(
        lambda x, w, b: conv(x, w, b, **options), inputs, device
    )
    assert report.fallbacks == {}
    by_op = {}
    for kernel in report.kernels:
        by_op.setdefault(kernel.op, []).append(kernel.name)
    assert by_op["aten::convolution"].count("conv_f32") == 1, by_op
    assert by_op["aten::convolution_backward"].count("conv_f32") == in_backward, by_op
    # Sums of up to 2400 products (the weights' gradient over every position): absolute errors of a few 1e-5.
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-4)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-4)


def test_an_implicit_gemm_convolution_is_bit_identical_in_both_modes():
    code = """
        import json, torch, torch.nn.functional as F, npusim
        g = torch.Generator().manual_seed(0)
        x, w = torch.randn(2, 48, 12, 14, generator=g), torch.randn(16, 48, 3, 3, generator=g)
        x, w = x.to("npusim").requires_grad_(), w.to("npusim").requires_grad_()
        with npusim.profile() as report:
            y = F.conv2d(x, w, padding=1)
            y.square().sum().backward()
        bits = [t.detach().cpu().view(torch.int32).flatten().tolist() for t in (y, x.grad, w.grad)]
        print(json.dumps({"bits": bits, "kernels": [k.name for k in report.kernels]}))
    """
    results = {}
    for mode in ("functional", "timed"):
        process = run_python(code, NPUSIM_MODE=mode)
        assert process.returncode == 0, process.stderr
        results[mode] = json.loads(process.stdout.splitlines()[-1])
        assert results[mode]["kernels"].count("conv_f32") == 3  # the output, the input's and the weights' gradients
    assert results["functional"]["bits"] == results["timed"]["bits"]


TRANSPOSED_CONVOLUTIONS = [
    ("3x3 strided", (2, 4, 5, 5), (4, 3, 3, 3), {"stride": 2}),
    ("3x3 stride 1, padded", (1, 5, 6, 7), (5, 4, 3, 3), {"padding": 1}),
    ("output padding", (2, 3, 4, 5), (3, 2, 3, 2), {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2)}),
    ("output padding past the stride", (1, 2, 5, 5), (2, 3, 3, 3), {"dilation": 2, "output_padding": 1}),
    ("grouped, dilated", (2, 4, 6, 5), (4, 3, 3, 2), {"stride": 2, "dilation": (2, 1), "groups": 2}),
    ("depthwise", (1, 6, 5, 5), (6, 1, 3, 3), {"padding": 1, "groups": 6}),
    ("1x1 strided", (2, 8, 4, 4), (8, 5, 1, 1), {"stride": 2}),
    ("1x1", (2, 8, 4, 3), (8, 5, 1, 1), {}),
    ("1-D", (3, 5, 7), (5, 4, 4), {"stride": 3, "padding": 2, "output_padding": 1}),
]


@pytest.mark.parametrize(
    "name, input_shape, weight_shape, options", TRANSPOSED_CONVOLUTIONS, ids=[c[0] for c in TRANSPOSED_CONVOLUTIONS]
)
def test_transposed_convolution_and_its_gradients_run_natively_and_match_cpu(
    name, input_shape, weight_shape, options, device
):
    """A transposed convolution is its convolution's input gradient, and its gradients that convolution's forward and
    weight gradient: all composed from native kernels, with output padding and groups."""
    conv = F.conv_transpose1d if len(input_shape) == 3 else F.conv_transpose2d
    groups = options.get("groups", 1)
    inputs = (random(*input_shape, seed=4), random(*weight_shape, seed=5), random(weight_shape[1] * groups, seed=6))
    out, grads, expected, expected_grads, report = forward_and_backward(
        lambda x, w, b: conv(x, w, b, **options), inputs, device
    )
    assert report.fallbacks == {}
    torch.testing.assert_close(out, expected, **TOLERANCE)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


def test_transposed_convolution_in_half_precision_rounds_once(device):
    x, w = random(1, 4, 5, 5, seed=4), random(4, 2, 3, 3, seed=5)
    for dtype in (torch.float16, torch.bfloat16):
        with npusim.profile() as report:
            out = F.conv_transpose2d(x.to(device, dtype), w.to(device, dtype), stride=2)
        assert report.fallbacks == {}
        expected = F.conv_transpose2d(x.to(dtype).float(), w.to(dtype).float(), stride=2).to(dtype)
        torch.testing.assert_close(out.cpu(), expected)


# Training is one fused kernel each way, whether a channel's elements fit the default chip's 256 KiB scratchpad or,
# as 2 x 300 x 300 floats (703 KiB) do not, are walked in chunks (test_long_rows.py). A channels-last input does not
# walk as [C, N, S]: it is composed from passes (the output's scale and shift one, mul_add, and the backward's x̂
# one, sub_mul).
@pytest.mark.parametrize("shape", [(4, 6, 5, 5), (8, 3), (2, 4, 7), (2, 2, 300, 300)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_and_eval_run_natively_and_match_cpu(shape, affine, device):
    module = (torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm1d)(shape[1], affine=affine)
    reference = (torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm1d)(shape[1], affine=affine)
    if affine:
        with torch.no_grad():
            module.weight.copy_(random(shape[1], seed=6))
            module.bias.copy_(random(shape[1], seed=7))
    reference.load_state_dict(module.state_dict())
    module.to(device)
    x, grad = random(*shape, seed=8), random(*shape, seed=9)
    x_device = x.to(device).requires_grad_()
    x_cpu = x.clone().requires_grad_()
    with npusim.profile() as report:
        module(x_device).backward(grad.to(device))
    reference(x_cpu).backward(grad)
    assert report.fallbacks == {}  # num_batches_tracked += 1 included: an int64 add kernel
    kernels = [r.name for r in report.kernels]
    assert sorted(kernels) == ["add_i64", "batch_norm_backward_f32", "batch_norm_f32"], kernels
    torch.testing.assert_close(x_device.grad.cpu(), x_cpu.grad, **TOLERANCE)
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(module.state_dict()[name].cpu(), value, **TOLERANCE)
    if affine:
        # A channel's gradient sums 180000 products on the large shape, in another order than the CPU's: within 1e-4.
        sums = TOLERANCE if x.numel() // shape[1] < 10000 else {"rtol": 1e-4, "atol": 1e-4}
        torch.testing.assert_close(module.weight.grad.cpu(), reference.weight.grad, **sums)
        torch.testing.assert_close(module.bias.grad.cpu(), reference.bias.grad, **sums)
    module.eval()
    reference.eval()
    with npusim.profile() as report:
        out = module(x_device * 2)
    assert report.fallbacks == {}
    torch.testing.assert_close(out.detach().cpu(), reference(x * 2).detach(), **TOLERANCE)


def test_batch_norm_of_a_channels_last_input_is_composed_and_matches_cpu(device):
    module, reference = torch.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    x = random(4, 3, 6, 6, seed=10).to(memory_format=torch.channels_last)
    x_device = x.to(device).requires_grad_()
    x_cpu = x.clone().requires_grad_()
    with npusim.profile() as report:
        module.to(device)(x_device).sum().backward()
    reference(x_cpu).sum().backward()
    assert report.fallbacks == {}
    assert "batch_norm_f32" not in [r.name for r in report.kernels]
    torch.testing.assert_close(x_device.grad.cpu(), x_cpu.grad, **TOLERANCE)
    torch.testing.assert_close(module.running_var.cpu(), reference.running_var, **TOLERANCE)


def test_functional_batch_norm_forms_run_natively(device):
    # torch.func and AOTAutograd trace _native_batch_norm_legit (running statistics passed and written) and its
    # no_stats form; torch.func.functional_call with a module in training reaches the first.
    x, weight, bias = random(4, 3, 5, 5, seed=1), random(3, seed=2), random(3, seed=3)
    running = [torch.zeros(3), torch.ones(3)]
    expected = torch.ops.aten._native_batch_norm_legit(x, weight, bias, *running, True, 0.1, 1e-5)
    device_running = [t.to(device) for t in (torch.zeros(3), torch.ones(3))]
    arguments = [t.to(device) for t in (x, weight, bias)]
    with npusim.profile() as report:
        actual = torch.ops.aten._native_batch_norm_legit(*arguments, *device_running, True, 0.1, 1e-5)
        no_stats = torch.ops.aten._native_batch_norm_legit.no_stats(*arguments, True, 0.1, 1e-5)
        evaluated = torch.ops.aten._native_batch_norm_legit(*arguments, *device_running, False, 0.1, 1e-5)
    assert report.fallbacks == {}
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got.cpu(), want, **TOLERANCE)
    for got, want in zip(device_running, running, strict=True):  # written in place, as on the CPU
        torch.testing.assert_close(got.cpu(), want, **TOLERANCE)
    torch.testing.assert_close(
        no_stats[0].cpu(),
        torch.ops.aten._native_batch_norm_legit.no_stats(x, weight, bias, True, 0.1, 1e-5)[0],
        **TOLERANCE,
    )
    want = torch.ops.aten._native_batch_norm_legit(x, weight, bias, *running, False, 0.1, 1e-5)
    torch.testing.assert_close(evaluated[0].cpu(), want[0], **TOLERANCE)
    module = torch.nn.BatchNorm2d(3).to(device)
    params = {name: value for name, value in module.named_parameters()}
    with npusim.profile() as report:
        out = torch.func.functional_call(module, params, (arguments[0],))
    assert report.fallbacks == {}
    torch.testing.assert_close(out.cpu(), torch.nn.BatchNorm2d(3)(x), **TOLERANCE)


POOLS = [
    ("2x2", (2, 3, 8, 8), {"kernel_size": 2}),
    ("3x3 stride 2 padded", (1, 2, 9, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("3-D input, divisor override", (3, 6, 6), {"kernel_size": (2, 3), "stride": (1, 2), "divisor_override": 5}),
    # ceil_mode's partial last windows and padding left out of the count: a divisor per output
    ("ceil mode", (2, 2, 9, 8), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
    ("padding not counted", (1, 3, 7, 7), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
    (
        "both",
        (2, 1, 6, 9),
        {"kernel_size": (2, 3), "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    ),
    ("ceil mode, divisor override", (1, 2, 5, 5), {"kernel_size": 2, "ceil_mode": True, "divisor_override": 3}),
]


@pytest.mark.parametrize("name, shape, options", POOLS, ids=[p[0] for p in POOLS])
def test_average_pooling_and_its_gradient_run_natively_and_match_cpu(name, shape, options, device):
    out, grads, expected, expected_grads, report = forward_and_backward(
        lambda x: F.avg_pool2d(x, **options), (random(*shape, seed=10),), device
    )
    assert report.fallbacks == {}
    torch.testing.assert_close(out, expected, **TOLERANCE)
    torch.testing.assert_close(grads[0], expected_grads[0], **TOLERANCE)


MAX_POOLS = [
    ("2x2", (2, 3, 8, 8), {"kernel_size": 2}),
    ("3x3 stride 2 padded", (1, 2, 9, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ("dilated", (2, 2, 10, 10), {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 2}),
    ("3-D input", (3, 6, 6), {"kernel_size": (2, 3), "stride": (1, 2)}),
    ("ceil mode", (1, 2, 3, 6), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
    (
        "ceil mode, padded and dilated",
        (2, 1, 9, 8),
        {"kernel_size": 2, "stride": 3, "padding": 1, "dilation": 2, "ceil_mode": True},
    ),
]


@pytest.mark.parametrize("name, shape, options", MAX_POOLS, ids=[p[0] for p in MAX_POOLS])
def test_max_pooling_values_indices_and_gradient_match_cpu_with_ties_and_nan(name, shape, options, device):
    x = random(*shape, seed=22)
    x.view(-1)[::7] = 0.0
    x.view(-1)[5] = float("nan")  # NaN wins its windows, as on the CPU
    for data in (x, torch.relu(x)):  # after relu, windows of equal zeros: the first one wins
        on_cpu, on_device = data.clone().requires_grad_(), data.to(device).requires_grad_()
        with npusim.profile() as report:
            out, indices = F.max_pool2d(on_device, return_indices=True, **options)
            out.backward(torch.ones_like(out))
        expected, expected_indices = F.max_pool2d(on_cpu, return_indices=True, **options)
        expected.backward(torch.ones_like(expected))
        assert report.fallbacks == {}
        assert torch.equal(indices.cpu(), expected_indices)
        torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad, rtol=0, atol=0)


def test_pooling_an_empty_batch_gives_an_empty_result(device):
    x = torch.empty(0, 3, 9)
    npusim._C.reset_fallback_counts()
    for pool in (
        lambda t: F.avg_pool1d(t, 6, 3, 2),
        lambda t: F.max_pool1d(t, 3, ceil_mode=True),
        lambda t: F.max_pool1d(t, 2, return_indices=True)[1],
    ):
        assert pool(x.to(device)).shape == pool(x).shape
    assert npusim._C.fallback_counts() == {}


@pytest.mark.parametrize(
    "shape, output_size",
    [((2, 8, 6, 6), 1), ((2, 8, 6, 6), (3, 2)), ((2, 8, 7, 5), (4, 3)), ((3, 9, 10), (4, 7)), ((1, 2, 3, 3), (5, 4))],
    ids=["global", "dividing", "overlapping windows", "unbatched", "upsampling"],
)
def test_adaptive_average_pooling_and_its_gradient_run_natively_and_match_cpu(shape, output_size, device):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(5), requires_grad=True)
    on_device = x.detach().to(device).requires_grad_()
    with npusim.profile() as report:
        actual = F.adaptive_avg_pool2d(on_device, output_size)
        gradient = torch.randn(actual.shape, generator=torch.Generator().manual_seed(6))
        actual.backward(gradient.to(device))
    assert report.fallbacks == {}
    expected = F.adaptive_avg_pool2d(x, output_size)
    expected.backward(gradient)
    torch.testing.assert_close(actual.detach().cpu(), expected.detach())
    torch.testing.assert_close(on_device.grad.cpu(), x.grad)


UPSAMPLING = [
    ("scale 2", (2, 3, 5, 7), {"scale_factor": 2}),
    ("scale 3 by 2, channels last", (1, 4, 6, 5), {"scale_factor": (3, 2)}),
    ("output size 4x", (2, 2, 3, 3), {"size": (12, 6)}),
    ("scale 1 (a copy)", (1, 2, 4, 4), {"scale_factor": 1}),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name, shape, options", UPSAMPLING, ids=[u[0] for u in UPSAMPLING])
def test_nearest_upsampling_and_its_gradient_run_natively_and_match_cpu_exactly(name, shape, options, dtype, device):
    """One kernel each way: the forward repeats, the backward sums each block in the CPU's order (half precision in
    float32, rounded once), so both are the CPU's bit for bit."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(7)).to(dtype)
    if "channels last" in name:
        x = x.to(memory_format=torch.channels_last)
    x.requires_grad_()
    on_device = x.detach().to(device).requires_grad_()
    with npusim.profile() as report:
        actual = F.interpolate(on_device, mode="nearest", **options)
        gradient = torch.randn(actual.shape, generator=torch.Generator().manual_seed(8)).to(dtype)
        actual.backward(gradient.to(device))
    assert report.fallbacks == {}
    assert [k.name.rsplit("_", 1)[0] for k in report.kernels if "upsample" in k.name] == [
        "upsample_nearest2d",
        "upsample_nearest2d_backward",
    ]
    expected = F.interpolate(x, mode="nearest", **options)
    expected.backward(gradient)
    assert torch.equal(actual.detach().cpu(), expected.detach())
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(on_device.grad.cpu(), x.grad, rtol=0, atol=0)


UPSAMPLING_OTHER_DIMS = [
    ("1-D by 3", (2, 3, 7), {"scale_factor": 3}, "nearest", "upsample_nearest1d"),
    ("1-D exact by 2", (2, 3, 7), {"size": 14}, "nearest-exact", "_upsample_nearest_exact1d"),
    ("2-D exact by 2x3", (1, 2, 4, 5), {"scale_factor": (2, 3)}, "nearest-exact", "_upsample_nearest_exact2d"),
    ("3-D by 2x1x3", (1, 2, 3, 4, 5), {"scale_factor": (2, 1, 3)}, "nearest", "upsample_nearest3d"),
    ("3-D exact by 2", (1, 2, 3, 4, 5), {"scale_factor": 2}, "nearest-exact", "_upsample_nearest_exact3d"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "name, shape, options, mode, op", UPSAMPLING_OTHER_DIMS, ids=[u[0] for u in UPSAMPLING_OTHER_DIMS]
)
def test_nearest_upsampling_of_one_to_three_dims_and_nearest_exact_match_cpu_exactly(
    name, shape, options, mode, op, dtype, device
):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(7)).to(dtype).requires_grad_()
    on_device = x.detach().to(device).requires_grad_()
    with npusim.profile() as report:
        actual = F.interpolate(on_device, mode=mode, **options)
        gradient = torch.randn(actual.shape, generator=torch.Generator().manual_seed(8)).to(dtype)
        actual.backward(gradient.to(device))
    assert report.fallbacks == {}
    assert [k.rsplit("_", 1)[0] for k in report.by_kernel() if "upsample" in k] == [op, f"{op}_backward"]
    expected = F.interpolate(x, mode=mode, **options)
    expected.backward(gradient)
    assert torch.equal(actual.detach().cpu(), expected.detach())
    assert torch.equal(on_device.grad.cpu(), x.grad)


BILINEAR = [
    ("scale 2", (2, 3, 5, 6), {"scale_factor": 2}),
    ("to a size", (1, 2, 7, 4), {"size": (10, 9)}),
    ("downsampling", (1, 2, 8, 8), {"size": (3, 5)}),
    ("fractional scale", (1, 1, 4, 4), {"scale_factor": 1.7}),
    ("channels last", (2, 4, 5, 3), {"scale_factor": 2}),
    ("linear, 1-D", (2, 3, 7), {"scale_factor": 2.5}),
    ("trilinear, 3-D", (1, 2, 3, 4, 5), {"size": (5, 7, 4)}),
]


@pytest.mark.parametrize("align_corners", [False, True], ids=["half pixels", "corners aligned"])
@pytest.mark.parametrize("name, shape, options", BILINEAR, ids=[b[0] for b in BILINEAR])
def test_linear_bilinear_and_trilinear_resizing_and_gradients_run_natively_and_follow_the_cpu(
    name, shape, options, align_corners
):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(9))
    if name == "channels last":
        x = x.to(memory_format=torch.channels_last)
    x.requires_grad_()
    on_device = x.detach().to("npusim").requires_grad_()
    mode, op = {3: ("linear", "upsample_linear1d"), 4: ("bilinear", "upsample_bilinear2d"),
                5: ("trilinear", "upsample_trilinear3d")}[len(shape)]  # fmt: skip
    with npusim.profile() as report:
        actual = F.interpolate(on_device, mode=mode, align_corners=align_corners, **options)
        gradient = torch.randn(actual.shape, generator=torch.Generator().manual_seed(10))
        actual.backward(gradient.to("npusim"))
    assert report.fallbacks == {}
    assert [k for k in report.by_kernel() if "upsample" in k] == [f"{op}_f32", f"{op}_backward_f32"]
    expected = F.interpolate(x, mode=mode, align_corners=align_corners, **options)
    expected.backward(gradient)
    # The same weights; the interpolation's rounding (and the backward's order of adds) may differ in the last bits.
    torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-6, atol=1e-6)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(on_device.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision_bilinear_upsampling_interpolates_in_float32_and_rounds_once(dtype):
    x = torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(11)).to(dtype)
    with npusim.profile() as report:
        actual = F.interpolate(x.to("npusim"), scale_factor=2, mode="bilinear").cpu()
    assert report.fallbacks == {} and actual.dtype == dtype
    # the float32 interpolation rounded once (where the two float32 results straddle a rounding boundary, an ulp apart)
    torch.testing.assert_close(actual, F.interpolate(x.float(), scale_factor=2, mode="bilinear").to(dtype))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize(
    "shape, size", [((1, 2, 4, 6), (6, 9)), ((2, 3, 7), (3,)), ((1, 1, 5, 4, 6), (3, 7, 2))], ids=["2-D", "1-D", "3-D"]
)
def test_nearest_resizing_by_any_factor_gathers_and_its_gradient_adds_back(shape, size, mode, device):
    """Fractional factors and downsampling: a gather along each dimension by PyTorch's own index map, and the
    backward's adds at those indices, without the fallback."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(9))
    out, grads, expected, expected_grads, report = forward_and_backward(
        lambda t: F.interpolate(t, size=size, mode=mode), (x,), device
    )
    assert report.fallbacks == {}
    assert torch.equal(out, expected)
    torch.testing.assert_close(grads[0], expected_grads[0], **TOLERANCE)


@pytest.mark.parametrize(
    "shape, output_size", [((2, 3, 9, 7), (4, 3)), ((1, 2, 5, 5), (5, 5)), ((3, 10), (4,)), ((2, 6, 4, 4), (1, 1))]
)
def test_adaptive_max_pooling_values_indices_and_gradient_match_cpu(shape, output_size, device):
    x = random(*shape, seed=31)
    x.view(-1)[::5] = 0.0
    x.view(-1)[3] = float("nan")
    pool = F.adaptive_max_pool1d if len(output_size) == 1 else F.adaptive_max_pool2d
    for data in (x, torch.relu(x)):  # windows of equal zeros: the first one wins
        on_cpu, on_device = data.clone().requires_grad_(), data.to(device).requires_grad_()
        with npusim.profile() as report:
            out, indices = pool(on_device, output_size, return_indices=True)
            out.backward(torch.ones_like(out))
        expected, expected_indices = pool(on_cpu, output_size, return_indices=True)
        expected.backward(torch.ones_like(expected))
        assert report.fallbacks == {}
        assert torch.equal(indices.cpu(), expected_indices)
        torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad, rtol=0, atol=0)


def test_adaptive_pooling_of_an_empty_batch(device):
    x = torch.empty(0, 8, 8)
    npusim._C.reset_fallback_counts()
    assert F.adaptive_avg_pool1d(x.to(device), 5).shape == (0, 8, 5)
    assert F.adaptive_max_pool1d(x.to(device), 5).shape == (0, 8, 5)
    assert npusim._C.fallback_counts() == {}


PADDINGS = [
    ("1-D", (2, 3, 10), (2, 3)),
    ("1-D without a batch", (3, 10), (1, 0)),
    ("2-D", (2, 3, 5, 6), (1, 2, 2, 1)),
    ("2-D channels last", (2, 3, 5, 6), (3, 1, 0, 4)),
    ("2-D cropping", (2, 3, 5, 6), (-1, 2, 0, -2)),
    ("3-D", (1, 2, 4, 5, 6), (1, 1, 2, 0, 1, 3)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64], ids=str)
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("name, shape, padding", PADDINGS, ids=[p[0] for p in PADDINGS])
def test_reflection_and_replication_padding_run_natively_and_match_cpu_exactly(name, shape, padding, mode, dtype):
    """The forward gathers each output element by PyTorch's own index map (one kernel); the backward adds each output
    gradient at the same index in the CPU's order (a fill, then one kernel), so both are the CPU's bit for bit."""
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(3)) * 5).to(dtype)
    if "channels last" in name:
        x = x.to(memory_format=torch.channels_last)
    floats = dtype.is_floating_point
    on_device = x.to("npusim").requires_grad_(floats)
    with npusim.profile() as report:
        actual = F.pad(on_device, padding, mode=mode)
        if floats:
            gradient = torch.randn(actual.shape, generator=torch.Generator().manual_seed(4)).to(dtype)
            actual.backward(gradient.to("npusim"))
    assert report.fallbacks == {}
    expected = F.pad(x.requires_grad_(floats), padding, mode=mode)
    assert torch.equal(actual.detach().cpu(), expected.detach()) and actual.stride() == expected.stride()
    op = f"{'reflection' if mode == 'reflect' else 'replication'}_pad{len(padding) // 2}d"
    assert [k.name.rsplit("_", 1)[0] for k in report.kernels if "_pad" in k.name] == [op] + [f"{op}_backward"] * floats
    if floats:
        expected.backward(gradient)
        assert torch.equal(on_device.grad.cpu(), x.grad)


def test_padding_errors_are_pytorchs_and_bools_take_the_fallback(device):
    x = torch.randn(1, 2, 3, 3)
    for mode in ("reflect", "replicate"):
        with pytest.raises(RuntimeError) as on_cpu:
            F.pad(x, (0, 0, 5, 5) if mode == "reflect" else (0, 0, -2, -2), mode=mode)
        with pytest.raises(RuntimeError) as on_npusim:
            F.pad(x.to(device), (0, 0, 5, 5) if mode == "reflect" else (0, 0, -2, -2), mode=mode)
        # PyTorch's meta functions check the sizes; they print a shape as torch.Size([...]) where the CPU prints [...]
        assert str(on_npusim.value).replace("torch.Size(", "").replace("])", "]") == str(on_cpu.value)
    with npusim.profile() as report:
        with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
            torch.ops.aten.reflection_pad2d(torch.ones(1, 1, 3, 3, dtype=torch.bool, device=device), [1, 1, 1, 1])
    assert "aten::reflection_pad2d.out" in report.fallbacks
    out = torch.empty(0, device=device)
    torch.ops.aten.replication_pad1d.out(x[0].to(device), [1, 2], out=out)  # out= resized
    assert torch.equal(out.cpu(), F.pad(x[0], (1, 2), mode="replicate"))


def test_max_pooling_of_a_window_of_only_minus_infinity_reports_its_first_position(device):
    x = torch.full((1, 1, 3, 3), float("-inf"))
    _, indices = F.max_pool2d(x.to(device), 2, 1, 1, return_indices=True)
    assert torch.equal(indices.cpu(), F.max_pool2d(x, 2, 1, 1, return_indices=True)[1])


def test_reductions_over_several_or_all_dimensions_run_natively(device):
    x = random(3, 4, 5, 6, seed=11)
    d = x.to(device)
    with npusim.profile() as report:
        results = [d.sum((1, 3)), d.mean((-1, -2), keepdim=True), d.sum(), d.mean(), d.sum([])]
        pooled = F.adaptive_avg_pool2d(d, 1)
    assert report.fallbacks == {}
    expected = [x.sum((1, 3)), x.mean((-1, -2), keepdim=True), x.sum(), x.mean(), x.sum([])]
    for result, reference in zip(results, expected, strict=True):
        torch.testing.assert_close(result.cpu(), reference, **TOLERANCE)
    torch.testing.assert_close(pooled.cpu(), F.adaptive_avg_pool2d(x, 1), **TOLERANCE)


def test_integer_add_and_sub_run_natively_and_wrap_like_the_cpu(device):
    a = torch.tensor([1, 2**40, -5, torch.iinfo(torch.int64).max])
    b = torch.tensor([3, 4, 2**62, 1])
    with npusim.profile() as report:
        results = [a.to(device) + b.to(device), a.to(device) - 7, a.int().to(device) + 2, a.to(device) + True]
        counter = torch.tensor(5).to(device)
        counter += 1
    assert report.fallbacks == {}
    expected = [a + b, a - 7, a.int() + 2, a + True]
    for result, reference in zip(results, expected, strict=True):
        assert result.dtype == reference.dtype
        assert torch.equal(result.cpu(), reference)
    assert counter.item() == 6


class ResidualBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


def resnet_style_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        ResidualBlock(8),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 10),
    )


def train_cnn_side_by_side(dtype, device):
    """Five SGD steps of the CNN in `dtype` on the device and on the CPU (asserting no CPU fallback): the two models,
    the input batch and the losses, device first."""
    torch.manual_seed(0)
    model, reference = resnet_style_cnn().to(dtype), resnet_style_cnn().to(dtype)
    reference.load_state_dict(model.state_dict())
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    x = random(4, 3, 12, 12, seed=12).to(dtype)
    y = torch.randint(0, 10, (4,), generator=torch.Generator().manual_seed(13))

    def loss(net, inputs, targets):
        return F.cross_entropy(net(inputs), targets)

    losses, expected, _ = train_side_by_side(model, reference, optimizer, reference_optimizer, loss, x, y)
    return model, reference, x, losses, expected


def test_resnet_style_cnn_trains_natively_and_follows_cpu(device):
    model, reference, x, losses, expected = train_cnn_side_by_side(torch.float32, device)
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
    model.eval()
    reference.eval()
    torch.testing.assert_close(model(x.to(device)).detach().cpu(), reference(x).detach(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_resnet_style_cnn_trains_natively_in_half_precision(dtype, device):
    """The whole CNN in half precision (weights, activations, batch-norm statistics), SGD: no CPU fallback, and the
    losses follow the CPU's in the same dtype."""
    model, _, _, losses, expected = train_cnn_side_by_side(dtype, device)
    torch.testing.assert_close(losses, expected, rtol=2e-2, atol=2e-2)
    assert losses[-1] < losses[0]
    for parameter in model.parameters():
        assert parameter.dtype == dtype


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_and_its_gradients_run_natively_and_match_cpu(affine, device):
    torch.manual_seed(0)
    reference = torch.nn.GroupNorm(4, 8, affine=affine)
    if affine:
        with torch.no_grad():
            reference.weight.normal_()
            reference.bias.normal_()
    model = torch.nn.GroupNorm(4, 8, affine=affine)
    model.load_state_dict(reference.state_dict())
    model.to(device)
    x = torch.randn(3, 8, 5, 5, generator=torch.Generator().manual_seed(16), requires_grad=True)
    on_device = x.detach().to(device).requires_grad_()
    gradient = torch.randn(3, 8, 5, 5, generator=torch.Generator().manual_seed(17))
    with npusim.profile() as report:
        actual = model(on_device)
        actual.backward(gradient.to(device))
    assert report.fallbacks == {}
    expected = reference(x)
    expected.backward(gradient)
    torch.testing.assert_close(actual.detach().cpu(), expected.detach())
    torch.testing.assert_close(on_device.grad.cpu(), x.grad)
    if affine:
        torch.testing.assert_close(model.weight.grad.cpu(), reference.weight.grad)
        torch.testing.assert_close(model.bias.grad.cpu(), reference.bias.grad)


@pytest.mark.parametrize("layer, dim", [("conv1d", 2), ("linear", 0)], ids=["conv1d over its last dim", "linear"])
def test_weight_norm_runs_natively_and_follows_the_cpu(layer, dim, device):
    """_weight_norm_interface and its backward (the parametrization wav2vec2's positional convolution uses, over the
    kernel's last dim, and the classic one over dim 0): one row kernel each, float32 norms, as PyTorch computes."""
    from torch.nn.utils.parametrizations import weight_norm

    torch.manual_seed(5)
    base = torch.nn.Conv1d(4, 6, 3, padding=1) if layer == "conv1d" else torch.nn.Linear(8, 5)
    model = weight_norm(base, name="weight", dim=dim)
    on_device = copy.deepcopy(model).to(device)
    x = torch.randn(2, 4, 10) if layer == "conv1d" else torch.randn(3, 8)
    with npusim.profile() as report:
        out = on_device(x.to(device))
        out.square().sum().backward()
    assert report.fallbacks == {}
    assert any(k.startswith("weight_norm_backward") for k in report.by_kernel())
    expected = model(x)
    expected.square().sum().backward()
    torch.testing.assert_close(out.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(
            dict(on_device.named_parameters())[name].grad.cpu(), parameter.grad, rtol=1e-4, atol=1e-5
        )


def test_weight_norm_in_half_precision_rounds_once(device):
    v, g = torch.randn(6, 4, 3), torch.randn(6, 1, 1)
    for dtype in (torch.bfloat16, torch.float16):
        w, norm = torch.ops.aten._weight_norm_interface(v.to(dtype).to(device), g.to(dtype).to(device), 0)
        length = v.to(dtype).float().square().sum((1, 2), keepdim=True).sqrt()
        assert norm.dtype == torch.float32 and w.dtype == dtype
        torch.testing.assert_close(norm.cpu(), length, rtol=1e-6, atol=0)
        torch.testing.assert_close(
            w.cpu(), (v.to(dtype).float() * (g.to(dtype).float() / length)).to(dtype), rtol=0, atol=0
        )
