"""A GPT-2 language model from `transformers` (small config, random weights, nothing downloaded) trains on npusim
with every operator native, and its losses follow the same steps on the CPU."""

import os

import torch
from conftest import train_side_by_side

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may be fetched

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402


def gpt2():
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2,
        n_head=4,
        n_embd=64,
        vocab_size=128,
        n_positions=32,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,  # so attention is the fused kernel (attention dropout takes the math path)
    )
    return GPT2LMHeadModel(config)


def test_gpt2_causal_lm_training_runs_natively_and_follows_cpu(device):
    model, reference = gpt2(), gpt2()
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    tokens = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))

    def causal_lm_loss(net, ids, labels):  # shifted cross-entropy, inside the model
        return net(ids, labels=labels).loss

    losses, expected, report = train_side_by_side(
        model, reference, optimizer, reference_optimizer, causal_lm_loss, tokens, tokens
    )
    assert {"matmul_f32", "attention_f32", "scatter_add_rows_f32"} <= {k.name for k in report.kernels}
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
