"""Matrix multiplication, ReLU and whole models on npusim against the same code on CPU.

The matrix engine accumulates each output in k order by fused multiply-adds, so results are close to CPU's (which
blocks differently) but not always bit-identical: these tests use float32 tolerances.
"""

import math

import pytest
import torch
from conftest import train_side_by_side

import npusim

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def random(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (4, 16, 16), (37, 50, 23), (64, 128, 96), (3, 300, 2)])
def test_mm_matches_cpu(m, k, n, device):
    a, b = random(m, k, seed=1), random(k, n, seed=2)
    with npusim.profile() as report:
        result = torch.mm(a.to(device), b.to(device))
    assert [r.name for r in report.kernels] == ["matmul_f32"]
    torch.testing.assert_close(result.cpu(), a @ b, **TOLERANCE)


def test_mm_on_transposed_and_sliced_operands(device):
    a, b = random(40, 30, seed=3), random(20, 40, seed=4)
    expected = a.t()[:, ::2] @ b.t()[::2, :]
    result = a.to(device).t()[:, ::2] @ b.to(device).t()[::2, :]
    torch.testing.assert_close(result.cpu(), expected, **TOLERANCE)


@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addmm_matches_cpu(beta, alpha, device):
    bias, a, b = random(17, seed=5), random(9, 33, seed=6), random(33, 17, seed=7)
    with npusim.profile() as report:
        result = torch.addmm(bias.to(device), a.to(device), b.to(device), beta=beta, alpha=alpha)
    assert report.fallbacks == {}
    torch.testing.assert_close(result.cpu(), torch.addmm(bias, a, b, beta=beta, alpha=alpha), **TOLERANCE)


# addmm, linear with a bias and baddbmm are one GEMM kernel whose epilogue scales the product and adds the bias,
# broadcast from a row, a column, a scalar or a full matrix, before its one rounding; named for what it fuses.
@pytest.mark.parametrize(
    "bias_shape, beta, alpha, name",
    [
        ((17,), 1, 1, "matmul_f32+bias"),
        ((9, 1), 0.5, 2.0, "matmul_f32+scale+scaled_bias"),
        ((), 1, 1, "matmul_f32+bias"),
        ((9, 17), 1, 1, "matmul_f32+bias"),
    ],
)
def test_addmm_is_one_kernel_with_its_bias_in_the_epilogue(bias_shape, beta, alpha, name, device):
    bias, a, b = torch.randn(bias_shape), random(9, 33, seed=6), random(33, 17, seed=7)
    with npusim.profile() as report:
        result = torch.addmm(bias.to(device), a.to(device), b.to(device), beta=beta, alpha=alpha)
        result.cpu()
    assert [r.name for r in report.kernels] == [name]
    torch.testing.assert_close(result.cpu(), torch.addmm(bias, a, b, beta=beta, alpha=alpha), **TOLERANCE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_with_bias_forward_is_one_kernel(dtype, device):
    layer = torch.nn.Linear(48, 40).to(dtype)
    x = torch.randn(35, 48, dtype=dtype)
    expected = layer(x)
    layer.to(device)
    with npusim.profile() as report:
        result = layer(x.to(device)).cpu()
    kernels = [r.name for r in report.kernels]
    assert kernels == [f"matmul_{'f32' if dtype == torch.float32 else 'bf16'}+bias"], kernels
    tolerance = TOLERANCE if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(result, expected, **tolerance)


def test_addmm_in_place_and_baddbmm_fuse_their_bias(device):
    bias, a, b = random(9, 17, seed=5), random(9, 33, seed=6), random(33, 17, seed=7)
    on_device = bias.to(device)
    with npusim.profile() as report:
        on_device.addmm_(a.to(device), b.to(device), beta=0.5)
        batched = torch.baddbmm(
            random(1, 17, seed=8).to(device), random(3, 9, 33, seed=9).to(device), random(3, 33, 17, seed=10).to(device)
        )
        batched.cpu()
    assert [r.name for r in report.kernels] == ["matmul_f32+scaled_bias", "matmul_f32+bias"]
    torch.testing.assert_close(on_device.cpu(), torch.addmm(bias, a, b, beta=0.5), **TOLERANCE)
    expected = torch.baddbmm(random(1, 17, seed=8), random(3, 9, 33, seed=9), random(3, 33, 17, seed=10))
    torch.testing.assert_close(batched.cpu(), expected, **TOLERANCE)


def test_vector_products_run_on_the_matrix_engine(device):
    generator = torch.Generator().manual_seed(5)
    a, b, matrix = (torch.randn(shape, generator=generator) for shape in ((37,), (37,), (19, 37)))
    bias = torch.randn(19, generator=generator)
    with npusim.profile() as report:
        results = [
            torch.dot(a.to(device), b.to(device)),
            torch.vdot(a.to(device), b.to(device)),
            torch.mv(matrix.to(device), a.to(device)),
            torch.addmv(bias.to(device), matrix.to(device), a.to(device), beta=0.5, alpha=2.0),
            matrix.to(device) @ a.to(device),
        ]
        in_place = bias.to(device)
        in_place.addmv_(matrix.to(device), b.to(device))
    assert report.fallbacks == {}
    expected = [
        torch.dot(a, b),
        torch.vdot(a, b),
        torch.mv(matrix, a),
        torch.addmv(bias, matrix, a, beta=0.5, alpha=2.0),
        matrix @ a,
    ]
    for actual, want in zip(results, expected, strict=True):
        assert actual.shape == want.shape
        torch.testing.assert_close(actual.cpu(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(in_place.cpu(), bias.addmv(matrix, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="1D tensors expected"):  # PyTorch's own error, from the fallback
        torch.dot(matrix.to(device), a.to(device))


def test_transposed_first_operand_is_transposed_inside_the_matmul_kernel(device):
    a, b = random(70, 50, seed=3), random(70, 30, seed=4)
    with npusim.profile() as report:
        result = a.to(device).t() @ b.to(device)  # as a linear layer's weight gradient reads its output gradient
    assert [r.name for r in report.kernels] == ["matmul_f32"]  # no separate transpose pass
    torch.testing.assert_close(result.cpu(), a.t() @ b, **TOLERANCE)


def test_relu_maximum_minimum_match_cpu_including_nan(device):
    x = torch.tensor([-2.0, -0.0, 0.0, 3.5, float("nan"), float("inf"), -float("inf")])
    y = torch.tensor([1.0, 0.0, -1.0, float("nan"), 2.0, 0.0, 5.0])
    for op in (torch.relu, lambda t: torch.maximum(t, y.to(t.device)), lambda t: torch.minimum(t, y.to(t.device))):
        torch.testing.assert_close(op(x.to(device)).cpu(), op(x), rtol=0, atol=0, equal_nan=True)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(64, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.layers(x)


def test_mlp_forward_runs_natively_and_matches_cpu(device):
    model, batch = MLP().eval(), random(32, 64, seed=8)
    with torch.no_grad():
        expected = model(batch)
        device_model = MLP().eval().to(device)
        with npusim.profile() as report:
            result = device_model(batch.to(device))
    torch.testing.assert_close(result.cpu(), expected, **TOLERANCE)
    assert report.fallbacks == {}
    # Each linear layer is one GEMM with its bias in the epilogue, the ReLUs between them.
    assert [r.name for r in report.kernels] == ["matmul_f32+bias", "max_f32"] * 2 + ["matmul_f32+bias"]


def test_linear_on_three_dimensional_input(device):
    layer = torch.nn.Linear(24, 12)
    x = random(2, 5, 24, seed=9)
    with torch.no_grad():
        torch.testing.assert_close(layer.to(device)(x.to(device)).cpu(), layer.cpu()(x), **TOLERANCE)


def test_more_cores_finish_a_matmul_sooner(tmp_path):
    from conftest import run_python

    code = """
        import torch, npusim
        a = torch.randn(256, 256).to("npusim")
        with npusim.profile() as report:
            a @ a
        kernel = report.kernels[0]
        print(kernel.cores, report.seconds(kernel.kernel_cycles))
    """
    seconds = {}
    for cores in (1, 4):
        config = tmp_path / f"cores{cores}.yaml"
        config.write_text(f"chip:\n  cores: {cores}\n")
        process = run_python(code, NPUSIM_MODE="timed", NPUSIM_CONFIG=config)
        assert process.returncode == 0, process.stderr
        launched, seconds[cores] = process.stdout.split()
        assert int(launched) == cores
    assert float(seconds[4]) < float(seconds[1]) / 2


def test_training_steps_follow_cpu(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    reference.load_state_dict(model.state_dict())
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, y = random(32, 8, seed=10), random(32, 1, seed=11)

    def mse(net, inputs, targets):  # forward, loss, backward and SGD all run as emitted kernels
        return torch.nn.functional.mse_loss(net(inputs), targets)

    train_side_by_side(model, reference, optimizer, reference_optimizer, mse, x, y, steps=3)
    for trained, expected in zip(model.parameters(), reference.parameters(), strict=True):
        assert trained.device.type == "npusim"
        torch.testing.assert_close(trained.detach().cpu(), expected.detach(), **TOLERANCE)


def cross_entropy(net, inputs, targets):
    return torch.nn.functional.cross_entropy(net(inputs).reshape(targets.numel(), -1), targets)


def test_adamw_training_of_a_three_layer_gelu_classifier_runs_natively_and_follows_cpu(device):
    def mlp():
        return torch.nn.Sequential(
            torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)
        )

    torch.manual_seed(0)
    model, reference = mlp(), mlp()
    reference.load_state_dict(model.state_dict())
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-2, weight_decay=0.1)
    x, y = random(24, 12, seed=12), torch.randint(0, 4, (24,), generator=torch.Generator().manual_seed(13))
    # Forward, cross-entropy, gelu's backward and AdamW's lerp, addcmul and addcdiv: all emitted kernels.
    losses, expected, _ = train_side_by_side(model, reference, optimizer, reference_optimizer, cross_entropy, x, y)
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
    for trained, reference_parameter in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(trained.detach().cpu(), reference_parameter.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_baddbmm_matches_cpu(beta, alpha, device):
    bias, a, b = random(3 * 4, 6, seed=50).reshape(3, 4, 6), random(3 * 4, 5, seed=51), random(3 * 5, 6, seed=52)
    a, b = a.reshape(3, 4, 5), b.reshape(3, 5, 6)
    if beta == 0:
        bias[0, 0, 0] = float("nan")  # ignored when beta is 0, as on the CPU
    with npusim.profile() as report:
        actual = torch.baddbmm(bias.to(device), a.to(device), b.to(device), beta=beta, alpha=alpha)
        in_place = bias.to(device).baddbmm_(a.to(device), b.to(device), beta=beta, alpha=alpha)
    assert report.fallbacks == {}
    expected = torch.baddbmm(bias, a, b, beta=beta, alpha=alpha)
    torch.testing.assert_close(actual.cpu(), expected, **TOLERANCE)
    torch.testing.assert_close(in_place.cpu(), expected, **TOLERANCE)


def test_bmm_and_attention_run_natively_and_match_cpu(device):
    q, k, v = (random(2 * 3 * 16, 8, seed=s).reshape(2, 3, 16, 8) for s in (20, 21, 22))
    a, b = random(4 * 5, 7, seed=23).reshape(4, 5, 7), random(4 * 7, 6, seed=24).reshape(4, 7, 6)
    with npusim.profile() as report:
        product = torch.bmm(a.to(device), b.to(device))
        scores = torch.softmax(q.to(device) @ k.to(device).transpose(-1, -2) / 8**0.5, dim=-1)
        attention = scores @ v.to(device)
    assert report.fallbacks == {}
    torch.testing.assert_close(product.cpu(), torch.bmm(a, b), **TOLERANCE)
    expected = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, dim=-1) @ v
    torch.testing.assert_close(attention.cpu(), expected, **TOLERANCE)


def test_bmm_is_one_launch_for_the_whole_batch_of_any_layout(device):
    """A batch of products is one matmul kernel, the entries' blocks shared out: with a first operand broadcast over the
    batch (stride 0), a transposed second operand and a result written into a strided view."""
    a = random(5, 9, seed=25)
    b = random(6, 11, 9, seed=26).transpose(1, 2)
    out = torch.zeros(6, 5, 2 * 11)
    with npusim.profile() as report:
        on_device, broadcast = out.to(device), a.to(device).expand(6, 5, 9)
        assert broadcast.stride(0) == 0
        torch.bmm(broadcast, b.to(device), out=on_device[:, :, ::2])
    assert [k.name for k in report.kernels if k.name.startswith("matmul")] == ["matmul_f32"]
    out[:, :, ::2] = torch.bmm(a.expand(6, 5, 9), b)
    torch.testing.assert_close(on_device.cpu(), out, **TOLERANCE)


def test_transformer_encoder_layer_trains_natively_and_follows_cpu(device):
    """nn.TransformerEncoderLayer (attention through scaled_dot_product_attention's math path, layer norm, GELU
    feed-forward) with a classification head, 5 AdamW steps. Dropout is 0 so that the CPU can follow; with dropout,
    see the next test."""

    def encoder():
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True)
        return torch.nn.Sequential(layer, torch.nn.Linear(32, 5))

    model, reference = encoder(), encoder()
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    x = random(2 * 10, 32, seed=30).reshape(2, 10, 32)
    y = torch.randint(0, 5, (20,), generator=torch.Generator().manual_seed(31))
    losses, expected, _ = train_side_by_side(model, reference, optimizer, reference_optimizer, cross_entropy, x, y)
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
    # Not parameter by parameter: the key projection's bias has a gradient of exactly 0 in exact arithmetic (softmax
    # ignores a constant added to a row), and AdamW scales float noise there up to full-size steps on either side.
    with torch.no_grad():
        torch.testing.assert_close(model(x.to(device)).cpu(), reference(x), rtol=1e-3, atol=1e-3)


def test_transformer_encoder_layer_with_dropout_trains_natively_and_reproducibly(device):
    """The same layer with dropout 0.1 in training mode: the masks come from the device generator, so the run cannot
    follow the CPU's, but it runs without fallback and the same seed gives the same losses."""

    def train():
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        model = torch.nn.Sequential(layer, torch.nn.Linear(32, 5)).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = random(2 * 10, 32, seed=30).reshape(2, 10, 32).to(device)
        y = torch.randint(0, 5, (20,), generator=torch.Generator().manual_seed(31)).to(device)
        losses = []
        for _ in range(3):
            with npusim.profile() as report:
                optimizer.zero_grad()
                loss = cross_entropy(model, x, y)
                loss.backward()
                optimizer.step()
            assert report.fallbacks == {}
            assert any(kernel.startswith("dropout") for kernel in report.by_kernel())
            losses.append(loss.item())
        return losses

    first = train()
    assert first == train() and all(math.isfinite(value) for value in first)


class SequenceRegressor(torch.nn.Module):
    """A 2-layer LSTM over the sequence, a linear head on its last step."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def test_lstm_trains_natively_and_follows_cpu(device):
    """nn.LSTM runs PyTorch's fused LSTM cell on accelerators (a CUDA-only op, with no CPU kernel to fall back to):
    npusim composes it, and its backward, from native kernels. 5 Adam steps follow the CPU's."""
    torch.manual_seed(0)
    model, reference = SequenceRegressor(), SequenceRegressor()
    reference.load_state_dict(model.state_dict())
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    reference_optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2)
    x, y = random(4 * 6, 8, seed=40).reshape(4, 6, 8), random(4, 3, seed=41)

    def mse(net, inputs, targets):
        return torch.nn.functional.mse_loss(net(inputs), targets)

    losses, expected, _ = train_side_by_side(model, reference, optimizer, reference_optimizer, mse, x, y)
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
    for trained, reference_parameter in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(trained.detach().cpu(), reference_parameter.detach(), rtol=1e-4, atol=1e-5)


def test_torch_compile_with_the_aot_eager_backend_trains_natively(device):
    """Dynamo captures the model and AOTAutograd its backward; the graphs run on npusim's native kernels (Inductor
    has no npusim code generator yet)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    reference.load_state_dict(model.state_dict())
    model.to(device)
    compiled = torch.compile(model, backend="aot_eager")
    x = torch.randn(4, 8)
    npusim._C.reset_fallback_counts()
    output = compiled(x.to(device))
    output.sum().backward()
    expected = reference(x)
    expected.sum().backward()
    assert npusim._C.fallback_counts() == {}
    torch.testing.assert_close(output.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model[0].weight.grad.cpu(), reference[0].weight.grad, rtol=1e-5, atol=1e-5)
