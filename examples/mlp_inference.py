"""An ordinary PyTorch script, written for a CUDA GPU: an MLP's inference, checked against the CPU.

It knows nothing of npusim. `npusim run --map-device cuda` runs it unchanged on the simulated NPU and reports how
long the chip took:

    npusim run --mode timed --map-device cuda examples/mlp_inference.py
    npusim run --mode timed --config datacenter --map-device cuda examples/mlp_inference.py
"""

import torch


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
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"running on {device} ({torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'})")
    model = make_model()
    batch = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(batch)
        result = model.to(device)(batch.to(device)).cpu()
    print("output (row 0):", result[0, :5])
    print("on the CPU    :", expected[0, :5])
    difference = (result - expected).abs().max().item()
    print(f"max |device - CPU| = {difference:.2e}")
    if not torch.allclose(result, expected, rtol=1e-4, atol=1e-5):
        raise SystemExit("the device's output differs from the CPU's")


if __name__ == "__main__":
    main()
