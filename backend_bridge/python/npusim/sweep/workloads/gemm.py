"""Built-in sweep workload: matrix products C = A @ B of a given shape and dtype, repeated.

npusim run --mode timed gemm.py --m 128 --n 128 --k 128 --dtype float32 --repeat 1
"""

import argparse

import torch

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--m", type=int, default=128)
parser.add_argument("--n", type=int, default=128)
parser.add_argument("--k", type=int, default=128)
parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
parser.add_argument("--repeat", type=int, default=1)
args = parser.parse_args()

dtype = getattr(torch, args.dtype)
generator = torch.Generator().manual_seed(0)
a = torch.randn(args.m, args.k, generator=generator).to(dtype)
b = torch.randn(args.k, args.n, generator=generator).to(dtype)
a_device, b_device = a.to("npusim"), b.to("npusim")
for _ in range(args.repeat):
    c = a_device @ b_device
torch.testing.assert_close(c.cpu().float(), (a.float() @ b.float()), rtol=2e-2, atol=2e-2)
