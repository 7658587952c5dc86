"""The npusim demo: a small PyTorch module runs, unchanged, on the simulated NPU; its result is checked against the
same module on the CPU, and the simulated chip's performance report is printed.

    NPUSIM_MODE=timed python examples/demo.py          # cycles and time from the SystemC model
    NPUSIM_CONFIG=edge NPUSIM_MODE=timed python examples/demo.py
"""

import torch

import npusim


class ScaledResidual(torch.nn.Module):
    """y = x * scale + shift;  out = (y + x) * y  — built only from ops npusim runs natively today (add, mul)."""

    def __init__(self, features):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.scale = torch.nn.Parameter(torch.rand(features, generator=generator) + 0.5)
        self.shift = torch.nn.Parameter(torch.randn(features, generator=generator))

    def forward(self, x):
        y = x * self.scale + self.shift
        return (y + x) * y


def report_bytes(report):
    return sum(record.bytes for record in report.kernels)


def main():
    torch.manual_seed(0)
    model = ScaledResidual(features=256)
    batch = torch.randn(64, 256)

    with torch.no_grad():
        expected = model(batch)
        device_model = model.to("npusim")
        device_batch = batch.to("npusim")
        with npusim.profile() as report:
            result = device_model(device_batch)
        result = result.cpu()

    props = npusim.properties()
    print(
        f"chip: {props['name']} ({props['cores']} core, {props['clock_ghz']} GHz, "
        f"{props['vector_lanes']} vector lanes, {props['dram_bandwidth_gbps']} GB/s DRAM), {props['mode']} mode"
    )
    print("result on npusim (first row, first 6 values):", result[0, :6])
    print("same on CPU                                 :", expected[0, :6])
    print("bit-identical to CPU:", torch.equal(result, expected))
    print()
    print(report.table())
    if report.total_kernel_cycles:
        seconds = report.seconds(report.total_kernel_cycles)
        print(
            f"\nsimulated kernel time: {report.total_kernel_cycles} cycles = {seconds * 1e6:.2f} us; "
            f"{report_bytes(report) / seconds / 1e9:.2f} GB/s of DRAM traffic"
        )
    if not torch.equal(result, expected):
        raise SystemExit("npusim result differs from CPU")


if __name__ == "__main__":
    main()
