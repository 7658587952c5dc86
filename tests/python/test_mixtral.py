"""A mixture-of-experts model from transformers (Mixtral, a small config with random weights) with its router's
load-balancing loss: on any device but the CPU, transformers counts tokens per expert with histc of int32, which the
CPU cannot run (so the CPU fallback could not help). It trains without any CPU fallback (its routing's stable sort
included), and its loss, load-balancing loss and gradients match the CPU's."""

import torch

import npusim


def test_mixtral_with_router_loss_trains_and_matches_cpu(device):
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=64,
        output_router_logits=True,
    )
    torch.manual_seed(0)
    model = MixtralForCausalLM(config)
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1))
    expected = model(input_ids=ids, labels=ids)
    expected.loss.backward()
    expected_grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model.to(device)
    with npusim.profile() as report:
        actual = model(input_ids=ids.to(device), labels=ids.to(device))
        actual.loss.backward()
    assert report.fallbacks == {}, report.fallbacks  # the experts' ordering of routed tokens too (a stable sort)
    assert any(k.startswith("sort_ranks") for k in report.by_kernel())
    torch.testing.assert_close(actual.loss.cpu(), expected.loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(actual.aux_loss.cpu(), expected.aux_loss, rtol=1e-5, atol=1e-5)
    for name, param in model.named_parameters():
        if name in expected_grads:
            torch.testing.assert_close(param.grad.cpu(), expected_grads[name], rtol=1e-4, atol=1e-5, msg=name)
