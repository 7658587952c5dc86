"""Output metadata as PyTorch defines it: for every entry of PyTorch's OpInfo database, each float32 sample input runs
on npusim and on the `meta` device (PyTorch's meta functions, which `torch.compile`'s fake tensors use to predict
every output), and each output's shape, dtype, strides, storage offset and aliasing of an input must agree. Each sample
runs twice: as OpInfo makes it, and with every input of two or more dimensions laid out in reverse dimension order
(column-major: same values, transposed memory), the case PyTorch's layout rules (TensorIterator's, `empty_like`'s)
exist for. Native kernels and the CPU fallback alike must give these layouts.

Strides are compared as PyTorch compares them (`check_significant_strides`: dimensions of one element or none are
free). Where PyTorch's own meta function and its CPU kernel disagree (the SVDs, FFTs, `nonzero_static`, the eval-mode
batch norm's saved statistics, ...), the CPU's metadata is accepted too: npusim cannot be more consistent than the two
references it is checked against."""

import pytest
import torch
from torch._prims_common import check_significant_strides
from torch.testing._internal.common_methods_invocations import op_db

import npusim  # noqa: F401  registers the device

# Entries whose samples cannot be compared this way, and why.
NOT_COMPARABLE = {
    "as_strided.partial_views": "its samples are views into a larger storage, which a copy to the device drops",
    "nn.functional.scaled_dot_product_attention": (
        "the meta device takes PyTorch's math path; npusim's fused kernel lays its output out as the query, as that "
        "kernel's own meta function says (test_attention.py checks it against that function)"
    ),
}


def column_major(tensor):
    """The same values laid out in reverse dimension order."""
    if tensor.dim() < 2:
        return tensor
    reverse = list(range(tensor.dim()))[::-1]
    return tensor.permute(reverse).contiguous().permute(reverse)


def moved(sample, device, layout):
    return sample.transform(lambda v: layout(v.detach()).to(device) if isinstance(v, torch.Tensor) else v)


def tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in tensors(item)]
    return []


def inputs_of(sample):
    return tensors([sample.input, list(sample.args), list(sample.kwargs.values())])


def run(op, sample):
    result = op(sample.input, *sample.args, **sample.kwargs)
    return tensors(result), inputs_of(sample)


def metadata(output, inputs):
    aliased = tuple(k for k, t in enumerate(inputs) if torch._C._is_alias_of(output, t))
    return output.shape, output.dtype, output.storage_offset(), aliased


def disagreement(actual, actual_inputs, reference, reference_inputs):
    """What differs between an npusim output and a reference output (meta or CPU), or None."""
    got, want = metadata(actual, actual_inputs), metadata(reference, reference_inputs)
    for what, a, b in zip(("shape", "dtype", "storage offset", "inputs aliased"), got, want, strict=True):
        if a != b:
            return f"{what} {a}, expected {b}"
    if not check_significant_strides(actual, reference, only_cuda=False)[0]:
        return f"strides {actual.stride()}, expected {reference.stride()} (shape {tuple(actual.shape)})"
    return None


def entry_name(op):
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


ENTRIES = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


@pytest.mark.parametrize("layout", [lambda t: t, column_major], ids=["as_made", "column_major"])
@pytest.mark.parametrize("op", ENTRIES, ids=entry_name)
def test_outputs_have_the_metadata_pytorch_predicts(op, layout):
    if entry_name(op) in NOT_COMPARABLE:
        pytest.skip(NOT_COMPARABLE[entry_name(op)])
    failures = []
    for index, sample in enumerate(op.sample_inputs("cpu", torch.float32)):
        try:
            meta_outputs, meta_inputs = run(op, moved(sample, "meta", layout))
            cpu_outputs, cpu_inputs = run(op, moved(sample, "cpu", layout))
        except Exception:  # noqa: BLE001  a call PyTorch itself rejects or has no meta function for
            continue
        device_outputs, device_inputs = run(op, moved(sample, "npusim", layout))
        assert len(device_outputs) == len(meta_outputs), f"sample {index}: outputs"
        for k, (actual, meta, cpu) in enumerate(zip(device_outputs, meta_outputs, cpu_outputs, strict=True)):
            against_meta = disagreement(actual, device_inputs, meta, meta_inputs)
            if against_meta and disagreement(actual, device_inputs, cpu, cpu_inputs):
                failures.append(f"sample {index}, output {k}: {against_meta}")
    assert not failures, "\n".join(failures[:5])
