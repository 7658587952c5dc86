"""The out= and in-place variants of every OpInfo entry that runs natively (test_opinfo.py's NATIVE_OPS) run natively
too and give the CPU's results: the first float32 sample of each, out= into empty npusim tensors, in-place on a copy
of the input."""

import pytest
import torch
from test_opinfo import NATIVE_OPS, full_name
from torch.testing._internal.common_methods_invocations import op_db

import npusim

NATIVE = [op for op in op_db if full_name(op) in NATIVE_OPS]


def first_sample(op, variant):
    """The first float32 sample the CPU runs `variant` on, with its CPU result (None if none does)."""
    for sample in op.sample_inputs("cpu", torch.float32):
        try:
            return sample, variant(sample)
        except (RuntimeError, ValueError, TypeError):
            continue
    return None, None


def on_device(sample):
    return sample.transform(lambda value: value.to("npusim") if isinstance(value, torch.Tensor) else value)


def out_tensors(result, device="npusim"):
    """Empty tensors of the result's dtypes on `device`, nested as the result is (histogramdd's list of edges)."""
    if isinstance(result, torch.Tensor):
        return torch.empty(0, dtype=result.dtype, device=device)
    parts = [out_tensors(t, device) for t in result]
    return parts if isinstance(result, list) else tuple(parts)


# Factory functions: their samples make CPU tensors, and an npusim out= is then another device's, an error on the CPU
# too.
FACTORIES = {"arange", "full", "linspace", "linspace.tensor_overload", "ones", "zeros", "randn", "logspace"}
WITH_OUT = [op for op in NATIVE if op.supports_out and full_name(op) not in FACTORIES]
IN_PLACE = [op for op in NATIVE if op.inplace_variant is not None]


@pytest.mark.parametrize("op", WITH_OUT, ids=full_name)
def test_out_variant_runs_natively(op):
    sample, expected = first_sample(op, lambda s: op(s.input, *s.args, **s.kwargs))
    if sample is None or not isinstance(expected, (torch.Tensor, tuple)):
        pytest.skip("no sample returning tensors")
    try:
        op(sample.input, *sample.args, out=out_tensors(expected, "cpu"), **sample.kwargs)
    except (RuntimeError, TypeError):
        pytest.skip("the CPU has no out= form for this sample either")  # histogramdd's bins as numbers
    moved = on_device(sample)
    out = out_tensors(expected)
    npusim._C.reset_fallback_counts()
    result = op(moved.input, *moved.args, out=out, **moved.kwargs)
    assert npusim._C.fallback_counts() == {}
    if result is None:  # the split copies fill a list of outs and return nothing
        result = out
    torch.testing.assert_close(result, expected, equal_nan=True, check_device=False, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", IN_PLACE, ids=full_name)
def test_in_place_variant_runs_natively(op):
    def in_place(sample):
        target = sample.input.clone()
        op.inplace_variant(target, *sample.args, **sample.kwargs)
        return target

    sample, expected = first_sample(op, in_place)
    if sample is None:
        pytest.skip("no sample the CPU runs in place")
    moved = on_device(sample)
    npusim._C.reset_fallback_counts()
    actual = in_place(moved)
    assert npusim._C.fallback_counts() == {}
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, rtol=1e-4, atol=1e-5)
