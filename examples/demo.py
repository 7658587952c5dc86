"""The npusim demo: a PyTorch MLP runs, unchanged, on the simulated NPU; its output is checked against the same model
on the CPU, and the simulated chip's performance report is printed.

    NPUSIM_MODE=timed python examples/demo.py                       # cycles and time from the SystemC model
    NPUSIM_CONFIG=datacenter NPUSIM_MODE=timed python examples/demo.py
"""

import time

import torch

import npusim


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    ).eval()


def main():
    model = make_model()
    batch = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))

    with torch.no_grad():
        expected = model(batch)
        device_model = model.to("npusim")
        device_batch = batch.to("npusim")
        started = time.perf_counter()
        with npusim.profile() as report:
            result = device_model(device_batch).cpu()
        host_seconds = time.perf_counter() - started

    props = npusim.properties()
    print(
        f"chip: {props['name']}: {props['cores']} core(s) at {props['clock_ghz']} GHz, "
        f"{props['vector_lanes']} vector lanes, {props['dram_bandwidth_gbps']} GB/s DRAM; {props['mode']} mode"
    )
    print("model:", " -> ".join(type(layer).__name__ for layer in model), f"on a batch of {batch.shape[0]}")
    print("output on npusim (row 0):", result[0, :5])
    print("output on CPU    (row 0):", expected[0, :5])
    difference = (result - expected).abs().max().item()
    print(f"max |npusim - CPU| = {difference:.2e} (the matrix engine sums in its own order)")
    print()
    print(report.table())
    if report.total_kernel_cycles:
        seconds = report.seconds(report.total_kernel_cycles)
        flops = 2 * sum(layer.in_features * layer.out_features for layer in model if hasattr(layer, "in_features"))
        flops *= batch.shape[0]
        print(
            f"\nsimulated kernel time {seconds * 1e6:.1f} us for {flops / 1e6:.1f} MFLOP "
            f"({flops / seconds / 1e9:.1f} GFLOP/s); simulating it took {host_seconds:.2f} s on this host"
        )
    if not torch.allclose(result, expected, rtol=1e-4, atol=1e-5):
        raise SystemExit("npusim output differs from CPU")


if __name__ == "__main__":
    main()
