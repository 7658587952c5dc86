"""An ordinary PyTorch script, written for a CUDA GPU: a few training steps of a small ResNet-style CNN (convolutions,
batch norm, ReLU, average pooling, residual blocks) on a CIFAR-sized batch, checked against the same steps on the CPU.

It knows nothing of npusim. `npusim run --map-device cuda` runs it unchanged on the simulated NPU and reports how
long the chip took (this is what `bash tools/dev.sh demo` does):

    npusim run --mode timed --map-device cuda examples/resnet_training.py
    npusim run --mode timed --config datacenter --map-device cuda examples/resnet_training.py
"""

import torch
import torch.nn.functional as F


class ResidualBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        ResidualBlock(16),
        torch.nn.AvgPool2d(2),
        ResidualBlock(16),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 10),
    )


def train(device, steps=3):
    model = make_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    images, labels = torch.randn(8, 3, 32, 32, generator=generator), torch.randint(0, 10, (8,), generator=generator)
    images, labels = images.to(device), labels.to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"training on {device} ({torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'})")
    losses = train(device)
    expected = train("cpu")
    print("losses on the device:", [f"{loss:.5f}" for loss in losses])
    print("losses on the CPU   :", [f"{loss:.5f}" for loss in expected])
    if not torch.allclose(torch.tensor(losses), torch.tensor(expected), rtol=1e-4, atol=1e-5):
        raise SystemExit("the device's losses differ from the CPU's")


if __name__ == "__main__":
    main()
