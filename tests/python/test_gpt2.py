"""A GPT-2 language model from `transformers` (small config, random weights, nothing downloaded) trains on npusim
with every operator native, and its losses follow the same steps on the CPU."""

import os

import torch
from conftest import train_side_by_side

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs only: nothing may be fetched

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper  # noqa: E402

import npusim  # noqa: E402


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


def test_top_k_and_top_p_filtering_of_a_vocabulary_runs_natively_as_on_the_cpu(device):
    """Sampling's filters over GPT-2's 50257 logits: top-k keeps 50 (topk beyond the small-k rounds), top-p sorts the
    whole row, takes a running sum of its softmax and scatters the mask back; the filtered logits equal the CPU's."""
    scores = torch.randn(2, 50257, generator=torch.Generator().manual_seed(2)) * 3
    filters = [TopKLogitsWarper(top_k=50), TopPLogitsWarper(top_p=0.9)]
    ids = torch.zeros(2, 1, dtype=torch.long)
    expected = scores
    for apply in filters:
        expected = apply(ids, expected)
    with npusim.profile() as report:
        actual = scores.to(device)
        for apply in filters:
            actual = apply(ids.to(device), actual)
        actual = actual.cpu()
    assert report.fallbacks == {}
    assert torch.equal(actual, expected)
    assert 0 < torch.isfinite(actual).sum(-1).min() <= 50


def test_sampled_generation_runs_natively(device):
    """model.generate with sampling (top-k 50, top-p 0.9) over a real vocabulary's width: no operator falls back."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=50257, n_positions=16)).eval()
    with npusim.profile() as report:
        tokens = model.to(device).generate(
            torch.tensor([[1, 2, 3]], device=device),
            do_sample=True,
            top_k=50,
            top_p=0.9,
            max_new_tokens=3,
            pad_token_id=0,
        )
    assert report.fallbacks == {}
    assert tokens.shape == (1, 6) and tokens.device.type == "npusim"
    assert torch.equal(tokens[0, :3].cpu(), torch.tensor([1, 2, 3]))
    assert int(tokens.max()) < 50257
