"""add, mul and copies on npusim against the same ops on CPU."""

import pytest
import torch

import npusim

SHAPES = [(8,), (1,), (3, 4), (2, 3, 5), (7, 33, 9), (5000,)]


def random(shape, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).to(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", [torch.add, torch.mul])
def test_binary_matches_cpu(op, shape, device):
    a, b = random(shape, 1), random(shape, 2)
    result = op(a.to(device), b.to(device))
    assert result.device.type == "npusim"
    torch.testing.assert_close(result.cpu(), op(a, b), rtol=0, atol=0)


@pytest.mark.parametrize("op", [torch.add, torch.mul])
def test_binary_runs_as_emitted_kernel_without_fallback(op, device):
    a, b = random((64,)).to(device), random((64,), 1).to(device)
    with npusim.profile() as report:
        op(a, b)
    assert [r.name for r in report.kernels] == [{torch.add: "add_f32", torch.mul: "mul_f32"}[op]]
    assert report.kernels[0].instructions > 0
    assert report.fallbacks == {}


@pytest.mark.parametrize(
    "make_a, make_b",
    [
        (lambda t: t.t(), lambda t: t.t()),  # both transposed
        (lambda t: t[:, ::2], lambda t: t[:, 1::2]),  # strided slices
        (lambda t: t.t()[:4], lambda t: t[:4, :]),  # mixed layouts
        (lambda t: t[0:1, :].expand(4, 8), lambda t: t[:4, :]),  # broadcast view
    ],
)
def test_binary_on_non_contiguous_inputs(make_a, make_b, device):
    base_a, base_b = random((8, 8), 3), random((8, 8), 4)
    expected = make_a(base_a) * make_b(base_b) + make_a(base_a)
    on_device_a, on_device_b = make_a(base_a.to(device)), make_b(base_b.to(device))
    assert not on_device_a.is_contiguous() or not on_device_b.is_contiguous()
    torch.testing.assert_close((on_device_a * on_device_b + on_device_a).cpu(), expected, rtol=0, atol=0)


def test_broadcasting_and_python_scalars(device):
    a, b = random((4, 1, 5)), random((3, 1))
    torch.testing.assert_close((a.to(device) + b.to(device)).cpu(), a + b, rtol=0, atol=0)
    torch.testing.assert_close((a.to(device) * 2.5 + 1).cpu(), a * 2.5 + 1, rtol=0, atol=0)


def test_alpha_in_place_and_out_variants(device):
    a, b = random((6, 7), 5), random((6, 7), 6)
    x = a.to(device)
    x.add_(b.to(device), alpha=-0.5)
    torch.testing.assert_close(x.cpu(), a.add(b, alpha=-0.5), rtol=0, atol=0)
    out = torch.empty((6, 7), device=device)
    torch.mul(a.to(device), b.to(device), out=out)
    torch.testing.assert_close(out.cpu(), a * b, rtol=0, atol=0)
    y = a.to(device)
    y.t().mul_(b.t().to(device))  # in place through a transposed view
    torch.testing.assert_close(y.cpu(), a * b, rtol=0, atol=0)


def test_empty_tensors(device):
    assert (torch.empty(0, device=device) + torch.empty(0, device=device)).shape == (0,)


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_copies_every_dtype(dtype, device):
    source = (random((5, 7), 7) * 50).to(dtype)
    on_device = source.to(device)
    assert on_device.dtype == dtype and on_device.device.type == "npusim"
    assert torch.equal(on_device.cpu(), source)
    # device → device: a flat copy, then a strided copy kernel
    assert torch.equal(on_device.clone().cpu(), source)
    assert torch.equal(on_device.t().contiguous().cpu(), source.t().contiguous())


@pytest.mark.parametrize("dtype", [torch.int16, torch.bfloat16, torch.float16], ids=str)
def test_copies_move_every_two_byte_pattern_exactly(dtype, device):
    """Copies move 2-byte elements as f16 whatever they are; a broadcast once added -0 to them, which turned bf16
    infinities and int16 -1 (bits that read as an f16 NaN) into the canonical NaN: torch.full(.., -1, int16) was -512.
    Every one of the 65536 patterns, through fills, broadcasts of one value, of rows and of columns, and transposes."""
    patterns = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    on_device = patterns.to(device)
    views = {
        "one value": lambda t: t[7:8].expand(9),
        "a column": lambda t: t.reshape(256, 256)[:, :1].expand(256, 7),
        "a row": lambda t: t.reshape(256, 256)[:1, :].expand(5, 256),
        "a middle dimension": lambda t: t.reshape(64, 1, 1024).expand(64, 3, 1024),
        "a transpose": lambda t: t.reshape(256, 256).t(),
        "every third": lambda t: t[::3],
    }
    for name, view in views.items():
        actual = view(on_device).contiguous().cpu().view(torch.int16)
        assert torch.equal(actual, view(patterns).contiguous().view(torch.int16)), name
    for bits in (0x7C00, 0x7C01, 0x7E00, 0x7F80, 0xFF80, 0xFFFF, 0x8000):  # each alone, broadcast
        one = torch.tensor([bits], dtype=torch.int32).to(torch.int16).view(dtype)
        assert torch.equal(
            one.to(device).expand(5).contiguous().cpu().view(torch.int16), one.expand(5).view(torch.int16)
        )
    assert torch.equal(
        torch.full((3,), -1, dtype=torch.int16, device=device).cpu(), torch.full((3,), -1, dtype=torch.int16)
    )
    minus_inf = torch.full((3,), float("-inf"), dtype=torch.bfloat16, device=device)
    assert torch.equal(minus_inf.cpu(), torch.full((3,), float("-inf"), dtype=torch.bfloat16))


@pytest.mark.parametrize(
    "shape, make_view",
    [
        ((300, 7), lambda t: t.t()),  # a short side, taken whole in one tile
        ((513, 129), lambda t: t.t()),  # several tiles each way, partial edge tiles
        ((4, 64, 6, 32), lambda t: t.permute(0, 2, 1, 3)),  # attention heads: rows contiguous on both sides
        ((4, 64, 6, 32), lambda t: t.permute(0, 3, 2, 1)),  # two outer dimensions around the transposed pair
        ((64, 384, 4), lambda t: t.transpose(1, 2)),  # a reduction moving its dimension innermost
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool])
def test_transposing_copies_match_cpu_and_move_tiles(shape, make_view, dtype, device):
    source = (random(shape, 3) * 50).to(dtype)
    view = make_view(source.to(device))
    with npusim.profile() as report:
        result = view.contiguous()
    assert torch.equal(result.cpu(), make_view(source).contiguous())
    names = [r.name for r in report.kernels]
    transposes = make_view(source).stride()[-1] != 1
    assert names == (["transpose"] if transposes else ["copy"]), names


def test_copy_into_a_transposed_view_moves_tiles(device):
    destination = torch.zeros(96, 80, device=device)
    values = random((80, 96), 4)
    with npusim.profile() as report:
        destination.t().copy_(values.to(device).clone())
    assert "transpose" in [r.name for r in report.kernels]
    torch.testing.assert_close(destination.cpu(), values.t(), rtol=0, atol=0)


def test_results_take_the_layout_of_a_transposed_input_as_on_cpu(device):
    x = random((64, 48), 5)
    for op in (lambda t: t.t() * 2, lambda t: torch.exp(t.t()), lambda t: t.t()[:, :20] + 1):
        expected, actual = op(x), op(x.to(device))
        assert actual.stride() == expected.stride()
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-6, atol=0)


def test_per_row_broadcast_matches_cpu(device):
    x, scale = random((300, 70), 6), random((300, 1), 7)
    for op in (torch.mul, torch.sub, torch.add):
        torch.testing.assert_close(op(x.to(device), scale.to(device)).cpu(), op(x, scale), rtol=0, atol=0)
        torch.testing.assert_close(op(scale.to(device), x.to(device)).cpu(), op(scale, x), rtol=0, atol=0)


def test_host_scalars_travel_in_the_argument_block_without_a_copy(device):
    x = random((40, 30), 9)
    on_device = x.to(device)
    ops = [
        lambda t: t * 2.5,
        lambda t: 1 - t,
        lambda t: 3 / t,
        lambda t: t * 1e300,  # beyond float32: inf, as the CPU's conversion gives
        lambda t: t.bfloat16() * 0.1,
        lambda t: torch.add(t, 1, alpha=2),
    ]
    with npusim.profile() as report:
        results = [op(on_device) for op in ops]
    assert "copy_h2d" not in [r.name for r in report.records]
    for op, result in zip(ops, results, strict=True):
        assert torch.equal(result.cpu(), op(x))


def test_copy_into_non_contiguous_destination(device):
    destination = torch.zeros(6, 6, device=device)
    values = random((6, 3), 8)
    destination[:, ::2] = values.to(device)  # device → strided device view
    destination[:, 1::2] = values  # host → strided device view
    expected = torch.zeros(6, 6)
    expected[:, ::2] = values
    expected[:, 1::2] = values
    torch.testing.assert_close(destination.cpu(), expected, rtol=0, atol=0)


def test_dtype_conversion_between_devices(device):
    source = random((10,), 9)
    torch.testing.assert_close(source.to(device).to(torch.float16).cpu(), source.to(torch.float16), rtol=0, atol=0)
    torch.testing.assert_close(source.to(device, torch.bfloat16).cpu(), source.to(torch.bfloat16), rtol=0, atol=0)


def test_views_share_device_storage(device):
    x = torch.zeros(4, 4, device=device)
    row = x[1]
    row.add_(torch.ones(4, device=device))
    assert x.cpu()[1].tolist() == [1.0] * 4
    assert x.view(16).untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_item_and_printing(device):
    x = torch.arange(8.0, device=device)
    assert ((x + x) * x)[3].item() == 18.0
    assert repr((x + x) * x) == "tensor([ 0.,  2.,  8., 18., 32., 50., 72., 98.], device='npusim:0')"


def test_generated_methods_and_device_module(device):
    x = torch.ones(3).npusim()
    assert x.is_npusim and x.device == torch.device("npusim:0")
    assert torch.npusim.is_available() and torch.npusim.device_count() == 1
    before = torch.npusim.memory_allocated()
    y = torch.empty(1024, device=device)
    assert torch.npusim.memory_allocated() >= before + 4096
    assert torch.npusim.max_memory_allocated() >= torch.npusim.memory_allocated()
    summary = torch.npusim.memory_summary()
    assert "peak allocated" in summary and f"{torch.npusim.memory_allocated() / 2**20:12.3f} MiB" in summary
    del y
    assert torch.npusim.memory_allocated() == before
    assert torch.npusim.get_device_properties().total_memory > 0
    assert torch.npusim.max_memory_reserved() == torch.npusim.memory_reserved() > 0


def test_host_access_to_device_memory_is_refused(device):
    x = torch.ones(4, device=device)
    assert x.data_ptr() != 0
    with pytest.raises(TypeError):
        x.numpy()  # host code gets no view of device memory


def test_out_of_memory_is_a_torch_error_and_device_stays_usable(device):
    with pytest.raises(torch.OutOfMemoryError, match="tried to allocate"):
        torch.empty(1 << 40, dtype=torch.uint8, device=device)
    assert (torch.ones(3, device=device) + 1).cpu().tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_and_factories_run_natively(dtype, device):
    with npusim.profile() as report:
        zeros = torch.zeros(5, 7, dtype=dtype, device=device)
        ones = torch.ones(300, dtype=dtype, device=device)
        strided = torch.empty(6, 6, dtype=dtype, device=device)[:, ::2].fill_(3)
    assert report.fallbacks == {}
    assert torch.equal(zeros.cpu(), torch.zeros(5, 7, dtype=dtype))
    assert torch.equal(ones.cpu(), torch.ones(300, dtype=dtype))
    assert torch.equal(strided.cpu(), torch.full((6, 3), 3, dtype=dtype))


def test_scalar_operand_on_either_side_runs_natively(device):
    x = random((3, 4), 10)
    with npusim.profile() as report:
        left = (2.0 * x.to(device)).cpu()
        in_place = x.to(device).mul_(torch.tensor(3.0, dtype=torch.float64)).cpu()
        scalar_first = torch.add(torch.tensor(1.5), x.to(device)).cpu()
    assert report.fallbacks == {}
    torch.testing.assert_close(left, 2.0 * x, rtol=0, atol=0)
    torch.testing.assert_close(in_place, x * 3.0, rtol=0, atol=0)
    torch.testing.assert_close(scalar_first, 1.5 + x, rtol=0, atol=0)


def test_save_and_load_keep_device_views_and_map_location(device, tmp_path):
    x = torch.arange(6.0).reshape(2, 3).to(device)
    path = tmp_path / "tensors.pt"
    torch.save({"x": x, "column": x[:, 1]}, path)
    loaded = torch.load(path)
    assert loaded["x"].device.type == "npusim"
    assert loaded["column"].cpu().tolist() == [1.0, 4.0]
    assert loaded["column"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()
    assert torch.load(path, map_location="cpu")["x"].device.type == "cpu"
    torch.save(torch.ones(3), path)
    assert torch.load(path, map_location="npusim").device.type == "npusim"
    with torch.npusim.device(0):
        assert torch.npusim.current_device() == 0


def test_dlpack_capsules_share_device_memory(device):
    """torch.utils.dlpack's capsules carry npusim tensors (as DLPack's extension device); PyTorch 2.13's
    __dlpack_device__ protocol knows no custom device, so torch.from_dlpack(tensor) is PyTorch's own error."""
    x = torch.arange(6.0).reshape(2, 3).to(device)
    y = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x[:, 1:]))
    assert y.device == x.device and y.shape == (2, 2)
    y.mul_(10)  # the same memory
    assert x.cpu().tolist() == [[0.0, 10.0, 20.0], [3.0, 40.0, 50.0]]
    with pytest.raises(ValueError, match="Unknown device type npusim for Dlpack"):
        torch.from_dlpack(x)


def test_cat_arange_and_tanh_backward_run_natively(device):
    a, b = torch.randn(2, 3), torch.randn(4, 3)
    c = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    with npusim.profile() as report:
        joined = torch.cat([a.to(device), torch.empty(0).to(device), b.to(device)])
        columns = torch.cat([c.to(device), c.to(device)[:, :1]], dim=1)
        ranges = [
            torch.arange(37, device=device),
            torch.arange(-3.0, 9.5, 0.5, device=device),
            torch.arange(5, 1, -2, device=device),
            torch.arange(1, 17, dtype=torch.int32, device=device),  # ALiBi's head slopes (BLOOM) count in int32
        ]
        y = torch.tanh(a.to(device).requires_grad_())
        y.backward(torch.ones_like(y))
    assert report.fallbacks == {}
    torch.testing.assert_close(joined.cpu(), torch.cat([a, b]))
    assert torch.equal(columns.cpu(), torch.cat([c, c[:, :1]], dim=1))
    for result, expected in zip(
        ranges,
        [
            torch.arange(37),
            torch.arange(-3.0, 9.5, 0.5),
            torch.arange(5, 1, -2),
            torch.arange(1, 17, dtype=torch.int32),
        ],
        strict=True,
    ):
        assert result.dtype == expected.dtype and torch.equal(result.cpu(), expected)
    with pytest.raises(RuntimeError):  # PyTorch's own shape error, through the fallback
        torch.cat([a.to(device), torch.randn(2, 4).to(device)])


CONVERTIBLE = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.float64,
]


@pytest.mark.parametrize("source", CONVERTIBLE, ids=str)
def test_dtype_conversions_on_the_device_match_the_cpu(source, device):
    # Values every type holds (0..100 and halves, so rounding to nearest-even shows), and a few negative ones.
    values = torch.cat([torch.arange(0, 100, 0.5), torch.tensor([-3.5, -1.0, -0.5, -0.0])])
    x = values.to(source) if source != torch.bool else values > 10
    for target in CONVERTIBLE:
        if target == source:
            continue
        if source.is_floating_point and target == torch.uint8:
            x_target = x.abs()  # negative floats to uint8 are undefined in C++, and so on the CPU
        else:
            x_target = x
        with npusim.profile() as report:
            converted = x_target.to(device).to(target)
        assert report.fallbacks == {}, (source, target, report.fallbacks)
        assert converted.dtype == target
        assert torch.equal(converted.cpu(), x_target.to(target)), (source, target)


def test_integer_narrowing_wraps_like_the_cpu_natively(device):
    # The low bytes, two's complement: what PyTorch's C casts give (the ISA's vcvt would saturate).
    x = torch.tensor([2**40 + 5, -1, 2**31, -(2**31) - 1, 300, -129, 7, 255, 128])
    for source in (torch.int64, torch.int32, torch.int16):
        values = x.to(source)
        for target in (torch.int32, torch.int16, torch.int8, torch.uint8):
            if torch.iinfo(target).bits > torch.iinfo(source).bits:
                continue
            with npusim.profile() as report:
                converted = values.to(device).to(target)
            assert report.fallbacks == {} and torch.equal(converted.cpu(), values.to(target)), (source, target)
    grid = torch.arange(-6, 6).view(3, 4).t()  # a transposed view
    assert torch.equal(grid.to(device).to(torch.int8).cpu(), grid.to(torch.int8))


def test_int16_converts_to_and_from_other_dtypes_natively(device):
    # int16 has no ISA element type: conversions go through int32 (narrowed to the low bytes, or sign-extended).
    values = torch.tensor([[-32768, -300, -1, 0], [1, 127, 255, 32767]], dtype=torch.int16)
    floats = torch.tensor([-32768.0, -300.7, -1.5, -0.2, 0.9, 127.2, 255.5, 32767.0])
    with npusim.profile() as report:
        widened = {target: values.to(device).to(target) for target in (torch.float32, torch.int32, torch.int64)}
        narrowed = values.to(device).to(torch.int8)
        transposed = values.t().to(device).to(torch.float32)
        from_float = floats.to(device).to(torch.int16)
        from_long = values.to(torch.int64).to(device).to(torch.int16)
    assert report.fallbacks == {}
    for target, result in widened.items():
        assert result.dtype == target and torch.equal(result.cpu(), values.to(target)), target
    assert torch.equal(narrowed.cpu(), values.to(torch.int8))
    assert torch.equal(transposed.cpu(), values.t().to(torch.float32))
    assert torch.equal(from_float.cpu(), floats.to(torch.int16)) and torch.equal(from_long.cpu(), values)


def same_floats(actual, expected):
    """Equal bit for bit (the sign of a zero counts), NaNs wherever the other has a NaN, whatever their payload."""
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[expected.element_size()]
    nan = expected.isnan()
    return (
        actual.dtype == expected.dtype
        and torch.equal(actual.isnan(), nan)
        and torch.equal(actual.masked_fill(nan, 0).view(bits), expected.masked_fill(nan, 0).view(bits))
    )


def test_float64_converts_on_the_device_rounding_as_the_cpu_does(device):
    # float64 is a storage type on npusim: vcvt converts to and from it, nothing computes in it. Rounding cases: to
    # float32 once (a tie broken by a bit beyond float32's, the ranges' ends, denormals, overflow); to float16 and
    # bfloat16 through float32, twice, as PyTorch's own conversion does (1 + 2^-11 + 2^-40 rounds to 1, not up);
    # integers beyond 2^53 to the nearest float64.
    floats = torch.tensor(
        [1 + 2**-24 + 2**-50, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, 3.4028235e38, 1e39, -1e300, 1e-40, 1e-320]
        + [5e-324, -0.0, float("inf"), float("-inf"), float("nan"), 65504.0, 65520.0, -2.5, 0.1],
        dtype=torch.float64,
    )
    integers = torch.tensor([2**53 + 1, -(2**62) - 3, 2**63 - 1, -(2**63), 0, -7, 123456789])
    with npusim.profile() as report:
        narrowed = {target: floats.to(device).to(target) for target in (torch.float32, torch.float16, torch.bfloat16)}
        widened = {source: floats.to(source).to(device).double() for source in (torch.float32, torch.bfloat16)}
        from_integers = integers.to(device).double()
        strided = floats.view(17, 1).expand(17, 3).t().to(device).float()  # a broadcast, transposed view
        complex_pair = torch.complex(floats, -floats).to(device).to(torch.complex64).to(torch.complex128)
        from_short = torch.tensor([-32768, -1, 32767], dtype=torch.int16).to(device).double()
        zero_dim = [floats.to(device)[k].float() for k in (0, 12)]  # 0-dim views into the tensor
    assert report.fallbacks == {}, report.fallbacks
    for k, result in zip((0, 12), zero_dim, strict=True):
        assert result.dim() == 0 and same_floats(result.cpu(), floats[k].float()), k
    for target, result in narrowed.items():
        assert same_floats(result.cpu(), floats.to(target)), target
    for source, result in widened.items():
        assert same_floats(result.cpu(), floats.to(source).double()), source
    assert torch.equal(from_integers.cpu(), integers.double())
    assert same_floats(strided.cpu(), floats.view(17, 1).expand(17, 3).t().float())
    expected_pair = torch.complex(floats, -floats).to(torch.complex64).to(torch.complex128)
    assert same_floats(torch.view_as_real(complex_pair.cpu()), torch.view_as_real(expected_pair))
    assert from_short.cpu().tolist() == [-32768.0, -1.0, 32767.0]


def test_float_to_integer_conversion_saturates_as_the_isa_documents(device):
    x = torch.tensor([1e10, -1e10, 300.0, -300.0, float("nan"), float("inf")])
    assert x.to(device).to(torch.int32).cpu().tolist() == [2**31 - 1, -(2**31), 300, -300, 0, 2**31 - 1]
    assert x.to(device).to(torch.int8).cpu().tolist() == [127, -128, 127, -128, 0, 127]


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (-1, 0), ()])
def test_flip_matches_cpu_for_views_and_dtypes(dims, device):
    for x in (torch.randn(7, 33, 5), torch.arange(7 * 33 * 5, dtype=torch.int8).reshape(7, 33, 5)):
        for view in (x, x.transpose(0, 2)):
            npusim._C.reset_fallback_counts()
            assert torch.equal(torch.flip(view.to(device), dims).cpu(), torch.flip(view, dims))
            assert npusim._C.fallback_counts() == {}
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        torch.flip(torch.ones(3, 3, device=device), (0, 0))


def test_bitwise_logic_of_masks_runs_natively_and_matches_cpu(device):
    generator = torch.Generator().manual_seed(13)
    a, b = torch.rand(5, 7, generator=generator) > 0.5, torch.rand(7, generator=generator) > 0.3
    npusim._C.reset_fallback_counts()
    for combine in (
        lambda x, y: x & y,
        lambda x, y: x | y,
        lambda x, y: x ^ y,
        lambda x, y: ~x,
        lambda x, y: (~x) | y,
        lambda x, y: x & True,
    ):
        assert torch.equal(combine(a.to(device), b.to(device)).cpu(), combine(a, b))
    in_place = a.to(device)
    in_place &= b.to(device)
    assert torch.equal(in_place.cpu(), a & b)
    bytes_ = torch.randint(0, 255, (9,), dtype=torch.uint8, generator=generator)
    assert torch.equal((bytes_.to(device) ^ bytes_.flip(0).to(device)).cpu(), bytes_ ^ bytes_.flip(0))
    # int64 and int32 results: generation's `unfinished_sequences & ~stopped`, a long and a bool
    longs = torch.tensor([1, 0, 5, -3, 2**40 + 7])
    for dtype in (torch.int64, torch.int32):
        x = longs.to(dtype)
        for combine in (
            lambda x, y: x & y,
            lambda x, y: x | y,
            lambda x, y: x ^ y,
            lambda x, y: ~x,
            lambda x, y: x & 6,
        ):
            assert torch.equal(combine(x.to(device), b[:5].to(device)).cpu(), combine(x, b[:5]))
            assert torch.equal(combine(x.to(device), x.flip(0).to(device)).cpu(), combine(x, x.flip(0)))
        unfinished = x.to(device)
        unfinished &= ~b[:5].to(device)
        assert torch.equal(unfinished.cpu(), x & ~b[:5])
    assert npusim._C.fallback_counts() == {}


def test_sign_sgn_and_abs_gradient_match_cpu_including_zeros_and_nan(device):
    x = torch.tensor([float("nan"), -0.0, 0.0, 2.0, -3.0, float("inf"), -float("inf")])
    npusim._C.reset_fallback_counts()
    for function in (torch.sign, torch.sgn):
        actual = function(x.to(device)).cpu()
        assert torch.equal(actual, function(x)) and actual.signbit().tolist() == function(x).signbit().tolist()
    t = torch.randn(5, 6, generator=torch.Generator().manual_seed(14), requires_grad=True)
    on_device = t.detach().to(device).requires_grad_()
    t.abs().sum().backward()
    on_device.abs().sum().backward()
    assert torch.equal(on_device.grad.cpu(), t.grad)
    assert npusim._C.fallback_counts() == {}


def test_any_and_all_of_masks_run_natively(device):
    mask = torch.rand(5, 6, generator=torch.Generator().manual_seed(15)) > 0.7
    npusim._C.reset_fallback_counts()
    for reduce in (lambda m: m.any(), lambda m: m.all(), lambda m: m.any(1), lambda m: m.all(0, keepdim=True)):
        assert torch.equal(reduce(mask.to(device)).cpu(), reduce(mask))
    assert npusim._C.fallback_counts() == {}
    empty = torch.zeros(0, dtype=torch.bool, device=device)  # through the fallback, with PyTorch's answers
    assert not empty.any().item() and empty.all().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_roll_runs_natively_for_any_dtype(dtype, device):
    x = (torch.arange(60).view(3, 4, 5) % 7).to(dtype)
    npusim._C.reset_fallback_counts()
    for shifts, dims in ((2, 1), (-1, 0), (7, -1), ((1, -2), (0, 2)), (0, 1), (4, 1)):
        assert torch.equal(x.to(device).roll(shifts, dims).cpu(), x.roll(shifts, dims))
    assert torch.equal(x.to(device).roll(13).cpu(), x.roll(13))  # flattened
    assert torch.equal(x.to(device).transpose(0, 2).roll(3, 0).cpu(), x.transpose(0, 2).roll(3, 0))
    assert npusim._C.fallback_counts() == {}
    with pytest.raises(RuntimeError):
        x.to(device).roll((1, 2), (0,))  # PyTorch's own error


def test_layouts_beyond_one_dma_run_natively_slice_by_slice(device):
    # A 6-D permutation (Swin's window partition) keeps more dimensions than a DMA walks once collapsed: the copy
    # and elementwise kernels run once per slice of the outermost dimension instead of on the CPU.
    x = torch.randn(16, 2, 2, 4, 2, 4, generator=torch.Generator().manual_seed(0))
    order = (0, 2, 1, 4, 3, 5)
    npusim._C.reset_fallback_counts()
    on_device = x.to(device).permute(order)
    assert torch.equal(on_device.contiguous().cpu(), x.permute(order).contiguous())
    assert torch.equal((on_device * on_device.contiguous()).cpu(), x.permute(order) * x.permute(order).contiguous())
    torch.testing.assert_close(on_device.exp().cpu(), x.permute(order).exp(), rtol=1e-6, atol=1e-6)
    assert npusim._C.fallback_counts() == {}


@pytest.mark.parametrize(
    ("start", "end", "steps"), [(0.0, 1.0, 11), (-3.5, 7.25, 100), (2.0, -2.0, 7), (1e-3, 1e3, 2), (5.0, 5.0, 1)]
)
def test_linspace_is_native_with_both_ends_exact(monkeypatch, start, end, steps):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    expected = torch.linspace(start, end, steps)
    actual = torch.linspace(start, end, steps, device="npusim").cpu()
    torch.testing.assert_close(actual, expected, rtol=2e-7, atol=1e-6)
    assert actual[0] == expected[0] and actual[-1] == expected[-1]
    assert torch.linspace(start, end, 0, device="npusim").numel() == 0


def test_nansum_counts_nans_as_zero(monkeypatch):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    x = torch.randn(6, 50, generator=torch.Generator().manual_seed(4))
    x[x > 1] = float("nan")
    for dims in (None, 1, (0, 1)):
        torch.testing.assert_close(torch.nansum(x.to("npusim"), dims).cpu(), torch.nansum(x, dims))
    torch.testing.assert_close(torch.nanmean(x.to("npusim"), 0).cpu(), torch.nanmean(x, 0))
    integers = torch.arange(10)
    assert torch.equal(torch.nansum(integers.to("npusim")).cpu(), torch.nansum(integers))
