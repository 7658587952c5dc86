"""torch.compile on npusim: Inductor's fused node groups run as single npusim kernels, equal to eager and the CPU."""

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from conftest import run_python
from torch._inductor.utils import run_and_get_code

import npusim
from npusim.inductor.runtime import ROUTES


@pytest.fixture(autouse=True)
def fresh_compile(monkeypatch):
    """Every test compiles anew (no graph reused from another test) and with CPU fallback forbidden."""
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    torch._dynamo.reset()
    ROUTES.clear()
    yield
    torch._dynamo.reset()


def compiled(function, *args, **options):
    """Runs torch.compile(function) on the npusim copies of args: (result, generated kernels' names)."""
    result, code = run_and_get_code(torch.compile(function, **options), *[a.to("npusim") for a in args])
    kernels = [line.split(" = ")[0] for source in code for line in source.splitlines() if "npusim_load_kernel(" in line]
    return result, [k for k in kernels if k.startswith("npusim_")]


def assert_close(actual, expected, **tolerance):
    torch.testing.assert_close(actual.cpu(), expected, **tolerance)


def test_pointwise_chain_is_one_fused_kernel():
    def f(x, bias):
        return torch.relu(x * 2 + bias).exp() - 1

    x, bias = torch.randn(33, 70), torch.randn(70)
    result, kernels = compiled(f, x, bias)
    assert_close(result, f(x, bias))
    assert len(kernels) == 1 and kernels[0].startswith("npusim_poi_fused_add_exp_mul_relu_sub")
    assert ROUTES[kernels[0]] == "fused"


def test_fmod_is_fused_and_exact():
    def f(x, y):
        return torch.fmod(x * 3, y) + 1

    x, y = torch.randn(40, 50) * 10, torch.randn(40, 50).abs() + 0.5
    result, kernels = compiled(f, x, y)
    assert torch.equal(result.cpu(), f(x, y))
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused", ROUTES


def test_softmax_is_one_fused_kernel():
    x = torch.randn(37, 300)
    result, kernels = compiled(lambda t: torch.softmax(t, -1), x)
    assert_close(result, torch.softmax(x, -1))
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused"


def test_argmax_and_argmin_are_fused_with_ties_and_nans_as_on_the_cpu():
    """The first index of the extremum, a NaN counting as it: over the last dimension, the first, and all elements."""

    def f(x):
        y = x * 2 - 1
        return y.argmax(-1), y.argmin(-1), y.argmax(0), (y.abs().argmin() + 1)

    x = torch.randint(-3, 4, (37, 50)).float()  # many ties
    x[5, 7] = x[20, 0] = float("nan")
    results, kernels = compiled(f, x)
    for actual, expected in zip(results, f(x), strict=True):
        assert actual.dtype == torch.int64 and torch.equal(actual.cpu(), expected)
    assert kernels and all(ROUTES[k] == "fused" for k in kernels), ROUTES


def test_softmax_over_the_outer_dimension():
    """Inductor splits it: the reductions over columns, then the pointwise pass in the output's order."""
    x = torch.randn(37, 300)
    result, kernels = compiled(lambda t: torch.softmax(t, 0), x)
    assert_close(result, torch.softmax(x, 0))
    assert all(ROUTES[k] == "fused" for k in kernels)


def test_layer_norm_forward_is_one_fused_kernel():
    x, weight, bias = torch.randn(20, 96), torch.randn(96), torch.randn(96)

    def f(t, w, b):
        return F.layer_norm(t, (96,), w, b)

    result, kernels = compiled(f, x, weight, bias)
    assert_close(result, f(x, weight, bias), atol=1e-5, rtol=1e-5)
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused"


def test_rms_norm_and_sum_over_the_outer_dimension():
    x = torch.randn(64, 48)

    def f(t):
        rms = t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)
        return rms, t.sum(0)

    (rms, column_sums), kernels = compiled(f, x)
    expected_rms, expected_sums = f(x)
    assert_close(rms, expected_rms, atol=1e-5, rtol=1e-5)
    assert_close(column_sums, expected_sums, atol=1e-4, rtol=1e-5)
    assert all(ROUTES[k] == "fused" for k in kernels)


def test_gelu_of_linear_is_one_kernel():
    """The product is a template whose epilogue is the bias and the gelu: one GEMM kernel, nothing else."""
    x, weight, bias = torch.randn(24, 40), torch.randn(72, 40), torch.randn(72)

    def f(t, w, b):
        return F.gelu(F.linear(t, w, b))

    result, code = run_and_get_code(torch.compile(f), x.to("npusim"), weight.to("npusim"), bias.to("npusim"))
    assert_close(result, f(x, weight, bias), atol=1e-5, rtol=1e-5)
    assert ROUTES and list(ROUTES.values()) == ["fused"]
    assert "extern_kernels" not in code[0].split("def call")[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batched_product_with_a_residual_epilogue(dtype):
    a, b, residual = (torch.randn(*shape).to(dtype) for shape in ((3, 37, 21), (3, 21, 45), (3, 37, 45)))

    def f(x, y, r):
        product = torch.bmm(x, y)
        return product, product * 0.5 + r

    (product, result), kernels = compiled(f, a, b, residual)
    expected_product, expected = f(a.float(), b.float(), residual.float())
    tolerance = {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 0.1, "rtol": 0.02}
    assert_close(product.float(), expected_product, **tolerance)
    assert_close(result.float(), expected, **tolerance)
    assert all(ROUTES[k] == "fused" for k in kernels)


def test_half_precision_loads_and_stores():
    x = torch.randn(17, 40).to(torch.bfloat16)
    y = torch.randn(17, 40).to(torch.float16)

    def f(a, b):
        return (a.float() * b.float()).sigmoid().to(torch.bfloat16)

    result, kernels = compiled(f, x, y)
    assert result.dtype == torch.bfloat16
    assert_close(result, f(x, y))
    assert ROUTES[kernels[0]] == "fused"


def test_embedding_and_layer_norm_is_one_fused_kernel():
    """The rows an index tensor picks (repeated tokens included) are gathered by the kernel that adds the positions
    and normalises them: one fused kernel, the results eager mode's."""
    tables = [torch.randn(50, 32), torch.randn(16, 32), torch.randn(32), torch.randn(32)]
    ids = torch.tensor([[3, 7, 3, 49, 0, 7, 7, 12], [1, 1, 2, 3, 5, 8, 13, 21]])

    def f(i, token_table, position_table, weight, bias):
        return F.layer_norm(F.embedding(i, token_table) + position_table[: i.shape[1]], (32,), weight, bias)

    result, kernels = compiled(f, ids, *tables)
    eager = f(ids.to("npusim"), *[t.to("npusim") for t in tables])
    assert_close(result, eager.cpu(), atol=1e-6, rtol=1e-6)
    assert_close(result, f(ids, *tables), atol=1e-5, rtol=1e-5)
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused", ROUTES


def test_cross_entropy_with_targets_forward_and_backward_is_fused():
    """The loss picks each target's log-probability (an index read from the targets, ignore_index masked out), and
    its backward scatters the gradient back: every compiled kernel fused, the values eager mode's."""
    logits = torch.randn(24, 40)
    targets = torch.randint(0, 40, (24,))
    targets[[3, 17]] = -100

    def step(x, y):
        x = x.detach().requires_grad_()
        loss = F.cross_entropy(x, y)
        loss.backward()
        return loss.detach(), x.grad

    (loss, grad), _ = compiled(step, logits, targets)
    expected_loss, expected_grad = step(logits.to("npusim"), targets.to("npusim"))
    assert_close(loss, expected_loss.cpu(), atol=1e-6, rtol=1e-6)
    assert_close(grad, expected_grad.cpu(), atol=1e-7, rtol=1e-6)
    cpu_loss, cpu_grad = step(logits, targets)
    assert_close(loss, cpu_loss, atol=1e-5, rtol=1e-5)
    assert_close(grad, cpu_grad, atol=1e-6, rtol=1e-5)
    assert ROUTES and all(route == "fused" for route in ROUTES.values()), ROUTES


def test_cat_of_three_tensors_is_one_fused_kernel_run_in_a_part_per_input():
    """cat reads each input under a mask of its columns: one kernel, launched as one part per input, each reading
    only its input (segments.py); the same bits as eager."""
    a, b, c = torch.randn(5, 3, 4), torch.randn(5, 6, 4), torch.randn(5, 2, 4)

    def f(x, y, z):
        return torch.cat([x, y * 2, z], 1) + 1

    result, kernels = compiled(f, a, b, c)
    assert torch.equal(result.cpu(), f(a.to("npusim"), b.to("npusim"), c.to("npusim")).cpu())
    assert torch.equal(result.cpu(), f(a, b, c))
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused, in 3 parts", ROUTES


def test_a_sum_of_select_scatters_runs_in_parts_with_the_cpus_bits():
    """nn.MultiheadAttention's backward sums the q, k and v gradients scattered into zeros: a kernel whose every point
    loads all three. Its parts load one each and still add the zeros, so a -0 comes out +0 as on the CPU; and as one
    reduction (the in-projection bias's gradient) it is split likewise."""

    def stacked(a, b, c):
        zeros = torch.zeros(3, *a.shape, device=a.device)
        parts = [torch.select_scatter(zeros, t, 0, k) for k, t in enumerate((a, b, c))]
        return parts[0] + parts[1] + parts[2]

    def bias_gradient(a, b, c):
        return stacked(a, b, c).sum(1)

    a, b, c = (torch.randn(64, 48) for _ in range(3))
    a[0, :5] = -0.0
    result, kernels = compiled(stacked, a, b, c)
    assert torch.equal(result.cpu().view(torch.int32), stacked(a, b, c).view(torch.int32))
    assert (result.cpu()[0, 0, :5].view(torch.int32) == 0).all()  # +0
    assert [ROUTES[k] for k in kernels] == ["fused, in 3 parts"], ROUTES
    ROUTES.clear()
    torch._dynamo.reset()
    result, kernels = compiled(bias_gradient, a, b, c)
    assert_close(result, bias_gradient(a, b, c), atol=1e-5, rtol=1e-5)
    assert [ROUTES[k] for k in kernels] == ["fused, in 3 parts"], ROUTES


def test_a_compiled_multihead_attention_step_splits_its_in_projection_gradient():
    """The packed in-projection's gradient of a compiled nn.MultiheadAttention: its kernels run in parts, and the
    gradients equal the CPU's."""
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(2, 16, 32)
    on_device = copy.deepcopy(attention).to("npusim")
    compiled_attention = torch.compile(lambda t: on_device(t, t, t, need_weights=False)[0].square().sum())
    compiled_attention(x.to("npusim")).backward()
    attention(x, x, x, need_weights=False)[0].square().sum().backward()
    for name, parameter in attention.named_parameters():
        assert_close(dict(on_device.named_parameters())[name].grad, parameter.grad, atol=1e-4, rtol=1e-4)
    assert "fused, in 3 parts" in ROUTES.values(), ROUTES


def test_cat_of_equal_parts_reads_strided_views(tmp_path):
    """Each part of a cat of equal widths is a strided view where its mask holds (the column modulo the width): no
    load by index. Parts of other widths are loaded by index (dma.ldx). Each kernel runs as a part per input."""
    code = """
        import torch, npusim
        a, b, c, d = torch.randn(4, 6, 8), torch.randn(4, 6, 8), torch.randn(4, 6, 8), torch.randn(4, 6, 5)
        def equal(x, y, z):
            return torch.cat([x, y, z], -1) + 1
        def unequal(x, w):
            return torch.cat([x, w], -1) * 2
        on = [t.to("npusim") for t in (a, b, c, d)]
        assert torch.equal(torch.compile(equal)(*on[:3]).cpu(), equal(a, b, c))
        assert torch.equal(torch.compile(unequal)(on[0], on[3]).cpu(), unequal(a, d))
        from npusim.inductor.runtime import ROUTES
        assert sorted(ROUTES.values()) == ["fused, in 2 parts", "fused, in 3 parts"], ROUTES
    """
    process = run_python(code, NPUSIM_DUMP_KERNELS=tmp_path, TORCHINDUCTOR_FORCE_DISABLE_CACHES=1)
    assert process.returncode == 0, process.stderr[-3000:]
    dumps = {}  # fused_add_cat_..., fused_cat_mul_...: each part's program
    for path in tmp_path.iterdir():
        if path.name.startswith("fused_"):
            dumps.setdefault(path.name.split("_")[1], []).append(path.read_text())
    assert {name: len(programs) for name, programs in dumps.items()} == {"add": 3, "cat": 2}, list(tmp_path.iterdir())
    assert all("dma.ldx" not in dump for dump in dumps["add"]) and all("dma.ldx" in dump for dump in dumps["cat"])


@pytest.mark.parametrize(
    ("function", "shapes", "staged"),
    [
        (lambda x, y: x.t() * 2 + y, [(48, 40), (40, 48)], 1),  # pointwise: y read across the store's order
        (lambda x, y: (x * y).sum((0, 2)), [(4, 4, 64, 32), (4, 1, 64, 32)], 1),  # rows of two dimensions read across
        (lambda x, y: (x + y).sum(0), [(64, 48), (48,)], 0),  # a row of one stride: turned by vtr in the kernel
    ],
    ids=["pointwise", "rows of two dimensions", "rows of one stride"],
)
def test_a_transposed_load_is_put_in_the_kernels_order_first(function, shapes, staged):
    """A load contiguous across the order the kernel's tiles walk (a DRAM burst per element) is copied into that
    order by the transposing copy just before the fused kernel; a row the kernel can turn with vtr itself is not. The
    results are eager mode's, and the kernel is still named in the profile."""
    x, y = (torch.randn(shape) for shape in shapes)
    with npusim.profile() as report:
        result, kernels = compiled(function, x, y)
    assert_close(result, function(x, y), rtol=1e-5, atol=1e-4)
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused"
    names = [r.name for r in report.records if r.name != "copy_h2d"]
    assert names[-1 - staged :] == ["transpose"] * staged + [kernels[0].split("_", 2)[2].rsplit("_", 1)[0]]
    assert report.records[-1].op == kernels[0]


def test_a_mask_widened_and_narrowed_again_is_not_converted(tmp_path):
    """Inductor's `any` over a row takes its bool mask to int64 and back (safe softmax's check for rows all -inf):
    the kernel reads the mask as it is, with no conversion either way, and the results are eager mode's."""
    code = """
        import torch, npusim
        x = torch.randn(64, 48)
        x[3] = -float("inf")
        def f(x):
            return torch.softmax(x, -1), torch.any(x > 1, -1)
        softmax, any_ = torch.compile(f)(x.to("npusim"))
        torch.testing.assert_close(softmax.cpu(), torch.softmax(x, -1), equal_nan=True)
        assert torch.equal(any_.cpu(), torch.any(x > 1, -1))
    """
    process = run_python(code, NPUSIM_DUMP_KERNELS=tmp_path, TORCHINDUCTOR_FORCE_DISABLE_CACHES=1)
    assert process.returncode == 0, process.stderr[-3000:]
    dumps = [path.read_text() for path in tmp_path.iterdir() if path.name.startswith("fused_")]
    assert dumps and not any("vcvt.i64.bool" in d or "vcvt.bool.i64" in d for d in dumps), dumps


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_pad_is_one_fused_kernel(dtype):
    x = torch.arange(7 * 9, dtype=dtype).reshape(7, 9) - 20

    def f(t):
        return F.pad(t, (2, 1, 0, 3), value=-5)

    result, kernels = compiled(f, x)
    assert torch.equal(result.cpu(), f(x))
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused", ROUTES


def test_embedding_backward_with_repeated_indices_is_fused_and_equals_eager():
    """The gradient of an embedding adds the rows of repeated tokens (an atomic-add store): in the tokens' order, on
    one core, so the sums are eager mode's bit for bit."""
    torch.manual_seed(0)
    weight = torch.randn(12, 24)
    ids = torch.tensor([[4, 4, 1, 4, 11, 0], [1, 4, 7, 7, 4, 2]])
    scale = torch.randn(2, 6, 24)

    def f(w, i, s):
        w = w.detach().requires_grad_()
        (F.embedding(i, w) * s).sum().backward()
        return w.grad

    result, _ = compiled(f, weight, ids, scale)
    eager = f(weight.to("npusim"), ids.to("npusim"), scale.to("npusim"))
    assert torch.equal(result.cpu(), eager.cpu())
    assert_close(result, f(weight, ids, scale), atol=1e-6, rtol=1e-6)
    scattering = [name for name in ROUTES if "embedding_dense_backward" in name]
    assert scattering and all(ROUTES[name] == "fused" for name in scattering), ROUTES


def test_relative_positions_and_a_rolled_window_are_fused():
    """Indices used as data that are not strided views with strides >= 0 (T5's relative positions i - j, a rolled
    window's (i + 6) % 8) read a table of their values computed on the host."""
    x = torch.randn(8, 8)

    def f(t):
        positions = torch.arange(8)
        relative = (positions[None, :] - positions[:, None]).to(t.device)
        rolled = ((positions + 6) % 8).to(t.device)
        return t * relative + rolled.to(t.dtype), relative.abs().clamp(max=3) * 2

    result, kernels = compiled(f, x)
    expected = f(x)
    assert torch.equal(result[0].cpu(), expected[0]) and torch.equal(result[1].cpu(), expected[1])
    assert kernels and all(ROUTES[k] == "fused" for k in kernels), ROUTES


def test_a_store_by_index_without_accumulation_runs_op_by_op_and_says_so():
    x, index, values = torch.zeros(10, 4), torch.tensor([1, 3, 6]), torch.randn(3, 4)

    def f(t, i, v):
        t = t.clone()
        t[i] = v * 2
        return t

    result, _ = compiled(f, x, index, values)
    assert torch.equal(result.cpu(), f(x, index, values))
    reasons = [route for route in ROUTES.values() if route != "fused"]
    assert len(reasons) == 1 and reasons[0].startswith("interpreted: a store by index without accumulation"), ROUTES


@pytest.mark.parametrize("interpret", [False, True])
def test_an_index_out_of_range_raises_index_error(monkeypatch, interpret):
    """As eager mode's embedding: IndexError, from the fused kernel's check or the interpreter's."""
    if interpret:
        monkeypatch.setenv("NPUSIM_COMPILE_INTERPRET", "1")
    weight = torch.randn(10, 8)

    def f(w, i):
        return F.embedding(i, w) + 1

    compiled(f, weight, torch.tensor([1, 2, 9]))
    assert ROUTES and all(route.startswith("interpreted" if interpret else "fused") for route in ROUTES.values())
    for bad in (10, -1):
        with pytest.raises(IndexError, match="index out of range"):
            compiled(f, weight, torch.tensor([1, bad, 3]))
    assert_close(compiled(f, weight, torch.tensor([0, 9]))[0], f(weight, torch.tensor([0, 9])))


def test_compiled_kernels_match_the_interpreter(monkeypatch):
    """The same program, fused and op by op, gives the same numbers."""
    x = torch.randn(40, 130)

    def f(t):
        return F.gelu(t) * torch.log_softmax(t, -1) + t.amax(-1, keepdim=True)

    fused, _ = compiled(f, x)
    monkeypatch.setenv("NPUSIM_COMPILE_INTERPRET", "1")
    torch._dynamo.reset()
    interpreted, _ = compiled(f, x)
    assert_close(fused, interpreted.cpu(), atol=2e-6, rtol=2e-6)
    assert_close(fused, f(x), atol=1e-5, rtol=1e-5)


def test_mlp_training_steps_compiled_equal_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Dropout(0.0), torch.nn.Linear(32, 4)
    )
    eager, compiled_model = copy.deepcopy(model).to("npusim"), copy.deepcopy(model).to("npusim")
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager, compiled_model)]
    step = torch.compile(lambda m, x, y: F.cross_entropy(m(x), y))
    for _ in range(3):
        x, y = torch.randn(8, 16).to("npusim"), torch.randint(0, 4, (8,)).to("npusim")
        for net, optimizer, loss in ((eager, optimizers[0], F.cross_entropy), (compiled_model, optimizers[1], None)):
            optimizer.zero_grad()
            value = step(net, x, y) if loss is None else loss(net(x), y)
            value.backward()
            optimizer.step()
    for a, b in zip(eager.parameters(), compiled_model.parameters(), strict=True):
        assert_close(b, a.detach().cpu(), atol=1e-5, rtol=1e-5)
    # Every kernel fused: the products with their epilogues, the norms, the loss (its gather of each target's
    # log-probability included) and its backward.
    assert ROUTES and all(route == "fused" for route in ROUTES.values()), ROUTES
    assert any("addmm" in name for name in ROUTES) and any("native_layer_norm" in name for name in ROUTES)


def test_cnn_training_steps_compiled_equal_eager():
    """The ResNet-style CNN of examples/: convolutions stay npusim's native kernels (extern calls), batch norm's
    statistics and gradients, the pooling backward and the residual adds are compiled kernels."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from resnet_training import make_model

    model = make_model()
    eager, compiled_model = copy.deepcopy(model).to("npusim"), copy.deepcopy(model).to("npusim")
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (eager, compiled_model)]
    forward = torch.compile(lambda m, x, y: F.cross_entropy(m(x), y))
    images, labels = torch.randn(4, 3, 16, 16).to("npusim"), torch.randint(0, 10, (4,)).to("npusim")
    for _ in range(2):
        for net, optimizer, step in ((eager, optimizers[0], None), (compiled_model, optimizers[1], forward)):
            optimizer.zero_grad()
            loss = F.cross_entropy(net(images), labels) if step is None else step(net, images, labels)
            loss.backward()
            optimizer.step()
    for a, b in zip(eager.parameters(), compiled_model.parameters(), strict=True):
        assert_close(b, a.detach().cpu(), atol=1e-4, rtol=1e-4)
    assert sum(route == "fused" for route in ROUTES.values()) > len(ROUTES) // 2, ROUTES


def test_compiled_optimizer_step_equals_eager():
    """torch.compile(optimizer.step): Inductor's multi-tensor AdamW, whose step counts stay host tensors."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    eager, compiled_model = copy.deepcopy(model).to("npusim"), copy.deepcopy(model).to("npusim")
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager, compiled_model)]
    steps = [optimizers[0].step, torch.compile(optimizers[1].step)]
    for _ in range(3):
        x = torch.randn(4, 16).to("npusim")
        for net, optimizer, step in zip((eager, compiled_model), optimizers, steps, strict=True):
            net(x).square().mean().backward()
            if step is steps[1]:
                with npusim.profile() as report:
                    step()
            else:
                step()
            optimizer.zero_grad()
    for a, b in zip(eager.parameters(), compiled_model.parameters(), strict=True):
        assert_close(b, a.detach().cpu(), atol=1e-6, rtol=1e-5)
    # The bias corrections from the host step counts travel in each launch's argument block: no copies to the device.
    assert [r.name for r in report.records if r.is_copy] == []
    # Inductor's foreach group (every parameter's update) is one multi-tensor kernel, each parameter a segment.
    assert [r.op for r in report.records] == [report.records[0].op]
    assert report.records[0].op.startswith("npusim_foreach_") and report.records[0].name.endswith("_x4")


def test_foreach_group_launches_kernels_of_one_form_together():
    """The members of a foreach group whose kernels are the same program over one-dimensional views are one
    launch; a member walked another way (a transposed tensor) is launched on its own. Results equal the CPU's."""
    torch.manual_seed(0)
    xs = [torch.randn(5), torch.randn(3, 7), torch.randn(64, 33), torch.randn(7, 3)]
    ys = [torch.randn(5), torch.randn(3, 7), torch.randn(64, 33), torch.randn(3, 7).t()]

    def update(xs, ys):
        return torch._foreach_addcmul(torch._foreach_mul(xs, 2.0), ys, ys)

    function = torch.compile(update)
    on_device = ([x.to("npusim") for x in xs], [y.to("npusim") for y in ys])
    function(*on_device)  # compile outside the profile
    with npusim.profile() as report:
        results = function(*on_device)
    for actual, expected in zip(results, update(xs, ys), strict=True):
        assert_close(actual, expected)
    launches = sorted(r.name.rsplit("_x", 1)[-1] if "_x" in r.name else "alone" for r in report.records)
    assert launches == ["3", "alone"], [r.name for r in report.records]
    ops = {r.name.endswith("_x3"): r.op for r in report.records}
    assert ops[True].startswith("npusim_foreach_") and ops[False].startswith("npusim_poi_fused__foreach_addcmul")


def test_max_pooling_stays_the_native_kernel():
    """Inductor's decomposition of max_pool2d_with_indices (int8 window offsets) is skipped on npusim: the forward
    and the backward are extern calls of npusim's pooling kernels, and everything around them fuses."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(128, 4),
    )
    reference = copy.deepcopy(model)
    x = torch.randn(2, 3, 8, 8)
    compiled_model = torch.compile(model.to("npusim"))
    compiled_model(x.to("npusim")).sum().backward()
    reference(x).sum().backward()
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)
    assert ROUTES and all(route == "fused" for route in ROUTES.values()), ROUTES


def test_training_batch_norm_stays_the_native_kernel():
    """Inductor's decompositions of training batch norm are skipped on npusim: the forward and the backward are extern
    calls of npusim's one-kernel batch norm, the running statistics updated as on the CPU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(512, 4),
    )
    reference = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8)
    compiled_model = torch.compile(model.to("npusim"))
    with npusim.profile() as report:
        compiled_model(x.to("npusim")).sum().backward()
    reference(x).sum().backward()
    kernels = [r.name for r in report.kernels]
    assert "batch_norm_f32" in kernels and "batch_norm_backward_f32" in kernels, kernels
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        assert_close(a.grad, b.grad, atol=1e-4, rtol=1e-4)
    for name, value in reference.state_dict().items():
        assert_close(model.state_dict()[name], value, atol=1e-5, rtol=1e-5)


def test_dynamic_shapes_two_sequence_lengths():
    def f(t):
        return torch.softmax(t * 0.5, -1)

    function = torch.compile(f, dynamic=True)
    for length in (24, 40):
        x = torch.randn(3, length, length)
        assert_close(function(x.to("npusim")), f(x))
    assert ROUTES and all(route == "fused" for route in ROUTES.values())


def test_dynamic_pointwise_kernel_keeps_its_reduced_range_of_one():
    """A dynamic-size pointwise kernel takes its pointwise range's size as an argument; the reduced range of 1 stays a
    number in the program."""
    function = torch.compile(F.silu, dynamic=True)
    for rows in (22, 9):
        x = torch.randn(rows, 128)
        assert_close(function(x.to("npusim")), F.silu(x))


def test_one_hot_compiles_without_its_device_assertions():
    """one_hot's decomposition checks its class range with torch._assert_async, which the kernels leave out."""

    def f(labels):
        return F.one_hot(labels, 5).sum(0)

    labels = torch.tensor([0, 3, 4, 3])
    result, _ = compiled(f, labels)
    assert_close(result, f(labels))


def test_integer_abs_fused_and_op_by_op(monkeypatch):
    """abs of int64 values and of an index expression (T5's relative positions), without npusim's missing integer
    abs kernel."""

    def f(x):
        positions = torch.arange(x.shape[-1], device=x.device)
        return (positions[None, :] - positions[:, None]).abs() + x.abs()

    x = torch.randint(-5, 5, (6, 6))
    for interpret in ("0", "1"):
        monkeypatch.setenv("NPUSIM_COMPILE_INTERPRET", interpret)
        torch._dynamo.reset()
        result, _ = compiled(f, x)
        assert_close(result, f(x))


def test_condition_of_constants_alone_op_by_op(monkeypatch):
    """select_backward over a dimension of size 1 selects by a condition of constants, a host scalar in the
    interpreter: where takes it with device values."""

    def f(g, h):
        return torch.ops.aten.select_backward(g, [2, 1, 8], 1, 0) + torch.ops.aten.slice_backward(
            h, [2, 1, 8], 2, 2, 6, 1
        )

    monkeypatch.setenv("NPUSIM_COMPILE_INTERPRET", "1")
    g, h = torch.randn(2, 8), torch.randn(2, 1, 4)
    result, _ = compiled(f, g, h)
    assert_close(result, f(g, h))


def test_compiled_kernels_in_the_profile_under_their_fused_names():
    x = torch.randn(64, 64)
    function = torch.compile(lambda t: torch.tanh(t) * t + 1)
    function(x.to("npusim"))  # compile outside the profile
    with npusim.profile() as report:
        function(x.to("npusim"))
    names = [record.op for record in report.records]
    assert any(name.startswith("npusim_poi_fused_add_mul_tanh") for name in names), names


def test_fx_graph_cache_hit_in_a_second_process(tmp_path):
    code = """
        import json, torch, npusim
        from torch._dynamo.utils import counters
        x = torch.randn(16, 32)
        y = torch.compile(lambda t: torch.softmax(t, -1) * 3)(x.to("npusim"))
        torch.testing.assert_close(y.cpu(), torch.softmax(x, -1) * 3)
        print(json.dumps(dict(counters["inductor"])))
    """
    environment = {"TORCHINDUCTOR_CACHE_DIR": tmp_path, "TORCHINDUCTOR_FX_GRAPH_CACHE": 1}
    first, second = run_python(code, **environment), run_python(code, **environment)
    assert first.returncode == 0, first.stderr[-3000:]
    assert second.returncode == 0, second.stderr[-3000:]
    first_counts = json.loads(first.stdout.strip().splitlines()[-1])
    second_counts = json.loads(second.stdout.strip().splitlines()[-1])
    assert first_counts.get("fxgraph_cache_miss") == 1
    assert second_counts.get("fxgraph_cache_hit") == 1


@pytest.mark.parametrize(
    "options", [{"fullgraph": True}, {"mode": "reduce-overhead"}, {"mode": "max-autotune"}], ids=lambda o: str(o)
)
def test_compile_modes(options):
    """CUDA graphs (reduce-overhead) do not apply to npusim and Inductor skips them; max-autotune has no Triton
    candidates to time here and keeps the template; either way the model runs compiled and correct."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    expected = model(x)
    function = torch.compile(model.to("npusim"), **options)
    for _ in range(2):
        assert_close(function(x.to("npusim")), expected, atol=1e-5, rtol=1e-5)


def test_compiled_kernels_are_dumped(tmp_path):
    code = """
        import torch, npusim
        x = torch.randn(16, 32)
        y = torch.compile(lambda t: torch.softmax(t, -1) * 3)(x.to("npusim"))
        torch.testing.assert_close(y.cpu(), torch.softmax(x, -1) * 3)
    """
    process = run_python(code, NPUSIM_DUMP_KERNELS=tmp_path, TORCHINDUCTOR_FORCE_DISABLE_CACHES=1)
    assert process.returncode == 0, process.stderr[-3000:]
    dumps = [path for path in tmp_path.iterdir() if path.name.startswith("fused_")]
    assert dumps, list(tmp_path.iterdir())
    text = dumps[0].read_text()
    assert "vrmax.f32" in text and "vrsum.f32" in text  # the softmax's two row reductions, in one kernel


def test_dropout_draws_inside_the_fused_kernel_as_the_interpreter_draws(monkeypatch):
    """A compiled dropout's random numbers are drawn in its fused kernel (RandomUniform at each point's index under
    Inductor's seed), the same numbers the op-by-op interpreter draws; Inductor's seeds come from the native randint."""

    def f(x):
        return F.dropout(x, 0.3, training=True) * 2 + torch.randn_like(x)

    x = torch.randn(3, 40, 70)

    def run():
        torch._dynamo.reset()
        ROUTES.clear()
        torch.manual_seed(1)
        result, kernels = compiled(f, x)
        return result.cpu(), kernels

    monkeypatch.setenv("NPUSIM_COMPILE_INTERPRET", "1")
    interpreted, _ = run()
    monkeypatch.delenv("NPUSIM_COMPILE_INTERPRET")
    result, kernels = run()
    assert len(kernels) == 1 and ROUTES[kernels[0]] == "fused", ROUTES
    assert torch.equal(result, interpreted)

    torch._dynamo.reset()
    result, kernels = compiled(lambda t: F.dropout(t, 0.3, training=True) * 2 + 1, x)
    result = result.cpu()
    kept = result != 1
    assert len(kernels) == 1 and abs(kept.double().mean().item() - 0.7) < 0.03
    assert torch.equal(result[kept], (x * (1 / 0.7) * 2 + 1)[kept])


def test_with_fallback_random_a_compiled_training_step_draws_eager_modes_numbers(monkeypatch):
    """torch._inductor.config.fallback_random=True: the compiled graph calls the native random ops, so a step with
    dropout draws the numbers eager mode draws and gives its results."""
    monkeypatch.setattr(torch._inductor.config, "fallback_random", True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Dropout(0.3)).to("npusim")
    x = torch.randn(8, 16).to("npusim")

    def step(module):
        model.zero_grad()
        torch.manual_seed(1)
        out = module(x)
        out.sum().backward()
        return out.detach().cpu(), [p.grad.cpu() for p in model.parameters()]

    eager_out, eager_grads = step(model)
    compiled_out, compiled_grads = step(torch.compile(model))
    assert (eager_out == 0).any()  # dropout dropped something
    torch.testing.assert_close(compiled_out, eager_out, rtol=1e-6, atol=1e-6)
    for compiled_grad, eager_grad in zip(compiled_grads, eager_grads, strict=True):
        torch.testing.assert_close(compiled_grad, eager_grad, rtol=1e-6, atol=1e-6)


def test_dropout_after_a_linear_layer_stays_out_of_the_gemm_epilogue():
    """A GEMM template's epilogue works on 2-D blocks of the product, whose points are not consecutive stream
    positions: the dropout after a linear layer is a pointwise kernel of its own, both fused (none interpreted)."""
    x, weight, bias = torch.randn(24, 40), torch.randn(72, 40), torch.randn(72)
    torch.manual_seed(2)
    result, kernels = compiled(lambda a, w, b: F.dropout(F.linear(a, w, b), 0.25, training=True) + 1, x, weight, bias)
    assert len(kernels) == 2 and all(ROUTES[k] == "fused" for k in kernels), ROUTES
    result = result.cpu()
    kept = result != 1
    assert torch.allclose(result[kept], (F.linear(x, weight, bias) / 0.75 + 1)[kept], rtol=1e-5, atol=1e-5)


def test_max_autotune_says_that_it_does_not_tune_npusims_kernels():
    a, b = torch.randn(32, 16), torch.randn(16, 8)
    with pytest.warns(UserWarning, match="mode='max-autotune' does not tune npusim's kernels"):
        result, kernels = compiled(lambda x, y: torch.relu(x @ y), a, b, mode="max-autotune")
    assert_close(result, torch.relu(a @ b), rtol=1e-5, atol=1e-5)
    assert len(kernels) == 1
