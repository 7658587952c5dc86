"""Built-in sweep workload: one GPT-2-style transformer block (pre-norm causal self-attention and a GELU MLP, as in
GPT-2), forward only or a training step, on a batch of token embeddings.

    npusim run --mode timed gpt2_block.py --batch 1 --seq 32 --d-model 64 --heads 4 [--train]
"""

import argparse
import math

import torch
import torch.nn.functional as F


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x):
        batch, seq, d_model = x.shape
        q, k, v = self.qkv(x).split(d_model, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, d_model // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_model // self.heads)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        attention = F.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return self.proj((attention @ v).transpose(1, 2).reshape(batch, seq, d_model))


class Block(torch.nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d_model), torch.nn.LayerNorm(d_model)
        self.attention = CausalSelfAttention(d_model, heads)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(d_model, 4 * d_model),
            torch.nn.GELU(approximate="tanh"),
            torch.nn.Linear(4 * d_model, d_model),
        )

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))


parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--batch", type=int, default=1)
parser.add_argument("--seq", type=int, default=32)
parser.add_argument("--d-model", type=int, default=64)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--train", action="store_true", help="a forward, backward and SGD step instead of a forward")
args = parser.parse_args()

torch.manual_seed(0)
block = Block(args.d_model, args.heads).to("npusim")
x = torch.randn(args.batch, args.seq, args.d_model).to("npusim")
if args.train:
    optimizer = torch.optim.SGD(block.parameters(), lr=0.01)
    block(x).square().mean().backward()
    optimizer.step()
else:
    with torch.no_grad():
        block(x)
torch.npusim.synchronize()
