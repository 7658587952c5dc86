"""Where the simulated time of a training step goes, per kernel, for the models the acceptance tests train.

    python bench/model_breakdown.py              # default config
    python bench/model_breakdown.py datacenter

For each model (a 3-layer MLP with AdamW, a ResNet-style CNN with SGD, an nn.TransformerEncoderLayer with AdamW, a
small GPT-2 from transformers with AdamW, both with dropout 0.1, and a 2-layer LSTM with Adam; the MLP also under
bfloat16 autocast, and three of them again with the optimizer's fused=True kernels) it runs one warm-up
step, then profiles one training step in timed mode and prints the device time, the CPU fallbacks (none expected)
and each kernel's share of the simulated time. Not a test: a look at the chip for architects; the figures depend
only on the config.
"""

import os
import sys

os.environ["NPUSIM_MODE"] = "timed"
os.environ["NPUSIM_CONFIG"] = sys.argv[1] if len(sys.argv) > 1 else "default"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import npusim  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from resnet_training import make_model as resnet  # noqa: E402


def mlp():
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)
    )
    return model, torch.optim.AdamW, torch.randn(64, 256), torch.randint(0, 10, (64,)), F.cross_entropy


def cnn():
    return resnet(), torch.optim.SGD, torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,)), F.cross_entropy


def encoder(dropout=0.1):
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=dropout, batch_first=True)
    model = torch.nn.Sequential(layer, torch.nn.Linear(128, 10))

    def loss(output, target):
        return F.cross_entropy(output.reshape(-1, 10), target)

    return model, torch.optim.AdamW, torch.randn(4, 64, 128), torch.randint(0, 10, (4 * 64,)), loss


def gpt2(dropout=0.1):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=2,
        n_head=4,
        n_embd=128,
        vocab_size=512,
        n_positions=128,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
    )
    ids = torch.randint(0, 512, (2, 64))
    return GPT2LMHeadModel(config), torch.optim.AdamW, ids, ids, None


class SequenceRegressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(64, 128, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


def lstm():
    return SequenceRegressor(), torch.optim.Adam, torch.randn(16, 32, 64), torch.randn(16, 10), F.mse_loss


def step(model, optimizer, inputs, targets, loss, autocast=None):
    optimizer.zero_grad()
    with torch.autocast("npusim", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        value = model(inputs, labels=targets).loss if loss is None else loss(model(inputs), targets)
    value.backward()
    optimizer.step()


def main():
    for name, build, autocast, fused in [
        ("MLP + AdamW", mlp, None, False),
        ("MLP + AdamW, bfloat16 autocast", mlp, torch.bfloat16, False),
        ("ResNet-style CNN + SGD", cnn, None, False),
        ("TransformerEncoderLayer + AdamW", encoder, None, False),
        ("GPT-2 (2 layers) + AdamW", gpt2, None, False),
        ("LSTM (2 layers, 32 steps) + Adam", lstm, None, False),
        ("MLP + AdamW(fused=True)", mlp, None, True),
        ("ResNet-style CNN + SGD(fused=True)", cnn, None, True),
        ("GPT-2 (2 layers) + AdamW(fused=True)", gpt2, None, True),
    ]:
        torch.manual_seed(0)
        model, optimizer_class, inputs, targets, loss = build()
        model.to("npusim")
        optimizer = optimizer_class(model.parameters(), lr=1e-3, **({"fused": True} if fused else {}))
        inputs, targets = inputs.to("npusim"), targets.to("npusim")
        step(model, optimizer, inputs, targets, loss, autocast)  # warm-up: optimizer state and the kernel cache
        with npusim.profile() as report:
            step(model, optimizer, inputs, targets, loss, autocast)
        total = report.total_device_cycles
        config, fallbacks = os.environ["NPUSIM_CONFIG"], report.fallbacks or "none"
        print(
            f"\n{name}: {report.seconds(total) * 1e3:.2f} ms of device time per training step on {config} "
            f"({total} cycles), {len(report.records)} commands, CPU fallbacks: {fallbacks}"
        )
        for kernel, figures in list(report.by_kernel().items())[:8]:
            print(f"  {kernel:<26}{figures['count']:>6} x {100 * figures['device_cycles'] / total:>6.1f}%")


if __name__ == "__main__":
    main()
