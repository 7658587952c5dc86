"""Built-in sweep workload: training steps of the small ResNet-style CNN of examples/resnet_training.py
(convolutions, batch norm, ReLU, residual blocks, pooling; SGD with momentum) on a CIFAR-sized batch.

    npusim run --mode timed cnn_step.py --batch 8 --size 32 --channels 16 --steps 1
"""

import argparse

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


parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--size", type=int, default=32, help="image height and width")
parser.add_argument("--channels", type=int, default=16)
parser.add_argument("--steps", type=int, default=1)
args = parser.parse_args()

torch.manual_seed(0)
c = args.channels
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, c, 3, padding=1, bias=False),
    torch.nn.BatchNorm2d(c),
    torch.nn.ReLU(),
    ResidualBlock(c),
    torch.nn.AvgPool2d(2),
    ResidualBlock(c),
    torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(),
    torch.nn.Linear(c, 10),
).to("npusim")
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
generator = torch.Generator().manual_seed(1)
images = torch.randn(args.batch, 3, args.size, args.size, generator=generator).to("npusim")
labels = torch.randint(0, 10, (args.batch,), generator=generator).to("npusim")
for _ in range(args.steps):
    optimizer.zero_grad()
    F.cross_entropy(model(images), labels).backward()
    optimizer.step()
torch.npusim.synchronize()
