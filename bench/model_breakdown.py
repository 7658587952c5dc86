"""Where the simulated time of a training step goes, per kernel, for the models the acceptance tests train.

    python bench/model_breakdown.py              # default config
    python bench/model_breakdown.py datacenter
    python bench/model_breakdown.py --smoke      # a tiny MLP only: CI's check that it still works

For each model (a 3-layer MLP with AdamW, a ResNet-style CNN with SGD, an nn.TransformerEncoderLayer with AdamW, a
small GPT-2 from transformers with AdamW, both with dropout 0.1, and a 2-layer LSTM with Adam; the MLP also under
bfloat16 autocast, and three of them again with the optimizer's fused=True kernels) it runs one warm-up
step, then profiles one training step in timed mode and prints the device time, the CPU fallbacks (none expected)
and each kernel's share of the simulated time. The same steps run on the CPU from the same weights and data, and the
profiled step's losses must agree (for the models with dropout, whose random masks differ between devices, the trained
model's loss in eval mode is compared with the CPU's from the same weights instead); a step that ran no kernel on the
device stops the run without a figure. Not a test: a look at the chip for architects; the figures depend only on
the config.
"""

import argparse
import copy
import os
import sys


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="default", help="a preset name or a config file")
    parser.add_argument("--smoke", action="store_true", help="a tiny MLP only (seconds, not minutes)")
    return parser.parse_args()


if __name__ == "__main__":  # compile_speedup.py imports the models and sets the environment itself
    ARGUMENTS = parse_arguments()
    os.environ["NPUSIM_MODE"] = "timed"
    os.environ["NPUSIM_CONFIG"] = ARGUMENTS.config
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import npusim  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from resnet_training import make_model as resnet  # noqa: E402


def mlp(features=256, hidden=512, batch=64):
    model = torch.nn.Sequential(
        torch.nn.Linear(features, hidden),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, 10),
    )
    return model, torch.optim.AdamW, torch.randn(batch, features), torch.randint(0, 10, (batch,)), F.cross_entropy


def tiny_mlp():
    return mlp(features=16, hidden=32, batch=4)


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


def loss_of(model, inputs, targets, loss, autocast=None):
    with torch.autocast(inputs.device.type, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        return model(inputs, labels=targets).loss if loss is None else loss(model(inputs), targets)


def step(model, optimizer, inputs, targets, loss, autocast=None):
    """One training step; its loss, detached."""
    optimizer.zero_grad()
    value = loss_of(model, inputs, targets, loss, autocast)
    value.backward()
    optimizer.step()
    return value.detach()


def has_dropout(model):
    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules())


def check_loss(name, actual, expected, autocast):
    """A figure from a run that computed something else would be no figure at all."""
    tolerance = 3e-2 if autocast is not None else 1e-3
    torch.testing.assert_close(
        actual.detach().float().cpu(),
        expected.detach().float(),
        rtol=tolerance,
        atol=tolerance,
        msg=f"{name}: loss differs from the CPU's",
    )


MODELS = [
    ("MLP + AdamW", mlp, None, False),
    ("MLP + AdamW, bfloat16 autocast", mlp, torch.bfloat16, False),
    ("ResNet-style CNN + SGD", cnn, None, False),
    ("TransformerEncoderLayer + AdamW", encoder, None, False),
    ("GPT-2 (2 layers) + AdamW", gpt2, None, False),
    ("LSTM (2 layers, 32 steps) + Adam", lstm, None, False),
    ("MLP + AdamW(fused=True)", mlp, None, True),
    ("ResNet-style CNN + SGD(fused=True)", cnn, None, True),
    ("GPT-2 (2 layers) + AdamW(fused=True)", gpt2, None, True),
]
SMOKE_MODELS = [("MLP (16-32-32-10) + AdamW", tiny_mlp, None, False)]


def main():
    for name, build, autocast, fused in SMOKE_MODELS if ARGUMENTS.smoke else MODELS:
        torch.manual_seed(0)
        model, optimizer_class, cpu_inputs, cpu_targets, loss = build()
        reference = copy.deepcopy(model)
        model.to("npusim")
        optimizer = optimizer_class(model.parameters(), lr=1e-3, **({"fused": True} if fused else {}))
        inputs, targets = cpu_inputs.to("npusim"), cpu_targets.to("npusim")
        # Nothing kept from the warm-up nor done before the profiled step: the figures are the same with the checks.
        step(model, optimizer, inputs, targets, loss, autocast)  # warm-up: optimizer state and the kernel cache
        with npusim.profile() as report:
            profiled_loss = step(model, optimizer, inputs, targets, loss, autocast)
        if has_dropout(model):  # random masks differ between devices: the trained model's loss without them
            reference.load_state_dict({key: value.cpu() for key, value in model.state_dict().items()})
            # With gradients on, as in training: without them nn.TransformerEncoderLayer takes a fused path npusim
            # runs on the CPU.
            model.eval(), reference.eval()
            expected = loss_of(reference, cpu_inputs, cpu_targets, loss, autocast)
            check_loss(name, loss_of(model, inputs, targets, loss, autocast), expected, autocast)
        else:  # the same two steps on the CPU: the second's loss depends on the first's gradients and update
            reference_optimizer = optimizer_class(reference.parameters(), lr=1e-3)
            step(reference, reference_optimizer, cpu_inputs, cpu_targets, loss, autocast)
            expected = step(reference, reference_optimizer, cpu_inputs, cpu_targets, loss, autocast)
            check_loss(name, profiled_loss, expected, autocast)
        total = report.total_device_cycles
        if not report.kernels or total <= 0:
            sys.exit(f"{name}: the profiled step ran {len(report.kernels)} kernels in {total} cycles: no figure")
        config, fallbacks = os.environ["NPUSIM_CONFIG"], report.fallbacks or "none"
        print(
            f"\n{name}: {report.seconds(total) * 1e3:.2f} ms of device time per training step on {config} "
            f"({total} cycles), {len(report.records)} commands, CPU fallbacks: {fallbacks}"
        )
        for kernel, figures in list(report.by_kernel().items())[:8]:
            print(f"  {kernel:<26}{figures['count']:>6} x {100 * figures['device_cycles'] / total:>6.1f}%")


if __name__ == "__main__":
    main()
