"""torch.compile on a zoo of Hugging Face transformers architectures: compiled equals eager, with no CPU fallback.

    OMP_NUM_THREADS=1 python bench/compile_zoo.py                 # every model
    OMP_NUM_THREADS=1 python bench/compile_zoo.py llama swin -v   # some models, with the interpreted kernels' reasons
    OMP_NUM_THREADS=1 python bench/compile_zoo.py --one t5        # one model in this process, with its traceback
    python bench/compile_zoo.py --eager                           # eager mode only, against the CPU
    python bench/compile_zoo.py --list
    python bench/compile_zoo.py --smoke                           # GPT-2 only: CI's check that it still works

Each model is a tiny configuration (2 layers, hidden size 64, vocabulary 256, 16 tokens, batch 2) with random weights,
built from its Config (nothing is downloaded). On npusim (functional mode unless NPUSIM_MODE says otherwise) it runs
forward and backward eagerly, then through torch.compile(model) with the same weights and inputs, in eval mode so that
both are deterministic. A model passes when neither run raises, no operator fell back to the CPU in either, the eager
loss, logits and every parameter's gradient equal those of the same model run on the CPU (atol = rtol = 1e-3) and the
compiled ones equal eager's (atol = rtol = 1e-4), and the runs launched kernels. Each model runs in a fresh
interpreter with a timeout, so a crash or a hang costs that model only. One line per model: verdict, reason, the
compiled kernels' routes (fused, interpreted op by op), Dynamo's graph breaks and the wall time. The exit status is 1
if any model failed.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import time
import traceback
from collections import Counter

import torch

TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
CPU_TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}  # another device's arithmetic: sums in another order
SMOKE_MODELS = ["gpt2"]
BATCH, TOKENS, VOCAB, HIDDEN = 2, 16, 256, 64
RESULT_PREFIX = "ZOO-RESULT "


def tokens():
    """Random token ids above the special ones (padding, beginning and end of sequence)."""
    return torch.randint(3, VOCAB, (BATCH, TOKENS))


def padded_mask():
    """All ones but for the second sample's last three tokens: padding goes through the attention masks."""
    mask = torch.ones(BATCH, TOKENS, dtype=torch.long)
    mask[1, -3:] = 0
    return mask


def decoder_config(**sizes):
    return dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        **sizes,
    )


def encoder_config():
    return dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=2 * HIDDEN,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def bert():
    from transformers import BertConfig, BertForMaskedLM

    ids = tokens()
    model = BertForMaskedLM(BertConfig(**encoder_config()))
    return model, dict(input_ids=ids, attention_mask=padded_mask(), labels=ids)


def roberta():
    from transformers import RobertaConfig, RobertaForMaskedLM

    ids = tokens()
    config = RobertaConfig(**encoder_config(), pad_token_id=1)
    return RobertaForMaskedLM(config), dict(input_ids=ids, attention_mask=padded_mask(), labels=ids)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0,
    )  # fmt: skip
    ids = tokens()
    return GPT2LMHeadModel(config), dict(input_ids=ids, attention_mask=padded_mask(), labels=ids)


def llama():
    """Rotary embeddings and grouped-query attention (2 key-value heads for 4 query heads)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    ids = tokens()
    return LlamaForCausalLM(LlamaConfig(**decoder_config())), dict(input_ids=ids, labels=ids)


def mistral():
    """A sliding window shorter than the sequence: the causal mask is a band."""
    from transformers import MistralConfig, MistralForCausalLM

    ids = tokens()
    return MistralForCausalLM(MistralConfig(**decoder_config(sliding_window=8))), dict(input_ids=ids, labels=ids)


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    ids = tokens()
    return Qwen2ForCausalLM(Qwen2Config(**decoder_config())), dict(input_ids=ids, labels=ids)


# The default experts implementation, "grouped_mm", treats every device but the CPU and MPS as CUDA: it counts tokens
# per expert with torch.histc on int32, which no CPU kernel (npusim's fallback) implements.


def bloom():
    """ALiBi: no position embeddings, a linear bias by key distance added to each head's attention scores."""
    from transformers import BloomConfig, BloomForCausalLM

    config = BloomConfig(vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=2, n_head=4, pad_token_id=0)
    ids = tokens()
    return BloomForCausalLM(config), dict(input_ids=ids, attention_mask=padded_mask(), labels=ids)


def mixtral():
    """Mixture of experts, 4 experts and the top 2 per token, as a loop over the experts that were hit."""
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(**decoder_config(num_local_experts=4, num_experts_per_tok=2), experts_implementation="eager")
    ids = tokens()
    return MixtralForCausalLM(config), dict(input_ids=ids, labels=ids)


def qwen2_moe():
    """Mixture of experts with a shared expert on every layer, each token's experts' weights gathered (batched_mm)."""
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    config = Qwen2MoeConfig(
        **decoder_config(
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=HIDDEN, shared_expert_intermediate_size=HIDDEN,
            decoder_sparse_step=1,
        ),
        experts_implementation="batched_mm",
    )  # fmt: skip
    ids = tokens()
    return Qwen2MoeForCausalLM(config), dict(input_ids=ids, labels=ids)


def t5():
    """Relative position buckets (a log of distances) instead of position embeddings."""
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=16, d_ff=2 * HIDDEN, num_layers=2, num_heads=4, dropout_rate=0.0,
        pad_token_id=0, decoder_start_token_id=0,
    )  # fmt: skip
    return T5ForConditionalGeneration(config), dict(input_ids=tokens(), attention_mask=padded_mask(), labels=tokens())


def bart():
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(
        vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=2 * HIDDEN, decoder_ffn_dim=2 * HIDDEN, max_position_embeddings=64,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
    )  # fmt: skip
    return BartForConditionalGeneration(config), dict(input_ids=tokens(), attention_mask=padded_mask(), labels=tokens())


def images(labels=10):
    return dict(pixel_values=torch.randn(BATCH, 3, 32, 32), labels=torch.randint(0, labels, (BATCH,)))


def vit():
    """Patch embeddings (a strided convolution) and a class token."""
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=32, patch_size=8, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=2 * HIDDEN, num_labels=10,
    )  # fmt: skip
    return ViTForImageClassification(config), images()


def convnext():
    """Depthwise 7x7 convolutions, channels-first layer norms and layer scale."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    config = ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, image_size=32, num_labels=10)
    return ConvNextForImageClassification(config), images()


def resnet():
    """Convolutions with batch norm (running statistics: eval mode) and max pooling."""
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=10)
    return ResNetForImageClassification(config), images()


def swin():
    """Window attention; the second block of the first stage shifts its windows (a roll and a masked attention)."""
    from transformers import SwinConfig, SwinForImageClassification

    config = SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4, num_labels=10
    )
    return SwinForImageClassification(config), images()


def videomae():
    """Video: tubelets of frames embedded by a 3-D convolution, then an encoder."""
    from transformers import VideoMAEConfig, VideoMAEForVideoClassification

    config = VideoMAEConfig(
        image_size=16, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=HIDDEN, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=2 * HIDDEN, num_labels=10,
    )  # fmt: skip
    video = torch.randn(BATCH, 4, 3, 16, 16)  # frames, channels, height, width: 2 x 2 x 2 tubelets
    return VideoMAEForVideoClassification(config), dict(pixel_values=video, labels=torch.randint(0, 10, (BATCH,)))


def wav2vec2():
    """A convolutional feature encoder over raw audio, a grouped positional convolution (weight norm), CTC loss."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    config = Wav2Vec2Config(
        vocab_size=32, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4, intermediate_size=2 * HIDDEN,
        conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, mask_time_prob=0.0, hidden_dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0, pad_token_id=0,
    )  # fmt: skip
    audio = torch.randn(BATCH, 400)  # 39 frames after the feature encoder
    return Wav2Vec2ForCTC(config), dict(input_values=audio, labels=torch.randint(1, 32, (BATCH, 6)))


def whisper():
    """Log-mel features through two convolutions, then an encoder-decoder."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, d_model=HIDDEN, encoder_ffn_dim=2 * HIDDEN, decoder_ffn_dim=2 * HIDDEN,
        max_source_positions=TOKENS, max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        decoder_start_token_id=1, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
    )  # fmt: skip
    features = torch.randn(BATCH, 16, 2 * TOKENS)  # the second convolution halves the frames
    return WhisperForConditionalGeneration(config), dict(input_features=features, labels=tokens())


def mamba():
    """A selective state-space scan (transformers' sequential path: no CUDA kernels) and a causal 1-D convolution."""
    from transformers import MambaConfig, MambaForCausalLM

    config = MambaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, state_size=8, num_hidden_layers=2, use_mambapy=False)
    ids = tokens()
    return MambaForCausalLM(config), dict(input_ids=ids, labels=ids)


ZOO = {
    "bert": ("encoder", bert),
    "roberta": ("encoder", roberta),
    "gpt2": ("decoder", gpt2),
    "llama": ("decoder", llama),
    "mistral": ("decoder", mistral),
    "qwen2": ("decoder", qwen2),
    "bloom": ("decoder (ALiBi)", bloom),
    "mixtral": ("decoder (MoE)", mixtral),
    "qwen2_moe": ("decoder (MoE)", qwen2_moe),
    "t5": ("encoder-decoder", t5),
    "bart": ("encoder-decoder", bart),
    "vit": ("vision", vit),
    "convnext": ("vision", convnext),
    "resnet": ("vision", resnet),
    "swin": ("vision", swin),
    "videomae": ("video", videomae),
    "wav2vec2": ("speech", wav2vec2),
    "whisper": ("speech", whisper),
    "mamba": ("state-space", mamba),
}


class Mismatch(Exception):
    pass


def forward_backward(model, run, inputs):
    """One forward (through `run`: the model or its compiled form) and backward: the loss and logits, each parameter's
    gradient (on the CPU), the operators that fell back to the CPU meanwhile and the commands the device ran."""
    import npusim

    model.zero_grad(set_to_none=True)
    npusim._C.set_recording(True, 0)  # records only: npusim.profile()'s module hooks would be traced by Dynamo
    output = run(**inputs)
    output.loss.backward()
    torch.npusim.synchronize()
    kernels = sum(not record["name"].startswith("copy_") for record in npusim._C.take_records(0))
    npusim._C.set_recording(False, 0)
    outputs = {key: output[key].detach().cpu() for key in ("loss", "logits") if output.get(key) is not None}
    gradients = {name: p.grad.cpu() for name, p in model.named_parameters() if p.grad is not None}
    fallbacks = dict(npusim._C.fallback_counts())
    npusim._C.reset_fallback_counts()
    return outputs, gradients, fallbacks, kernels


def cpu_forward_backward(model, inputs):
    """The reference: the same forward and backward on the CPU."""
    model.zero_grad(set_to_none=True)
    output = model(**inputs)
    output.loss.backward()
    outputs = {key: output[key].detach() for key in ("loss", "logits") if output.get(key) is not None}
    return {"outputs": outputs, "gradients": {n: p.grad for n, p in model.named_parameters() if p.grad is not None}}


def compare(eager, compiled, tolerance=TOLERANCE, what=""):
    """Raises Mismatch naming the first output or gradient of `compiled` that differs from `eager`'s."""
    for kind in ("outputs", "gradients"):
        expected, actual = eager[kind], compiled[kind]
        missing = sorted(set(expected) ^ set(actual))
        if missing:
            raise Mismatch(f"{what}{kind} present in one run only: {missing[:3]}")
        for name, value in expected.items():
            try:
                torch.testing.assert_close(actual[name], value, **tolerance)
            except AssertionError as error:
                details = " ".join(line.strip() for line in str(error).splitlines()[1:4])
                raise Mismatch(f"{what}{kind[:-1]} {name}: {details}") from None


def run_one(name, eager_only=False):
    """Runs one model in this process; returns its result as a dict (verdict, reason, routes, graph breaks). With
    `eager_only`, the eager runs and their comparison with the CPU only."""
    from torch._dynamo.utils import counters

    import npusim
    from npusim.inductor.runtime import ROUTES

    torch.manual_seed(0)
    model, cpu_inputs = ZOO[name][1]()
    model = model.eval()
    reference = copy.deepcopy(model)
    model = model.to("npusim")
    inputs = {key: value.to("npusim") for key, value in cpu_inputs.items()}
    npusim._C.reset_fallback_counts()
    problems, stage = [], "eager"
    try:
        outputs, gradients, fallbacks, kernels = forward_backward(model, model, inputs)
        eager = {"outputs": outputs, "gradients": gradients}
        if fallbacks:
            problems.append(f"eager CPU fallback {fallbacks}")
        stage = "CPU reference"
        compare(cpu_forward_backward(reference, cpu_inputs), eager, CPU_TOLERANCE, "eager against the CPU: ")
        if eager_only:
            if kernels == 0:
                problems.append("no work: no kernels ran")
            raise StopIteration
        stage = "compiled"
        outputs, gradients, fallbacks, compiled_kernels = forward_backward(model, torch.compile(model), inputs)
        if fallbacks:
            problems.append(f"compiled CPU fallback {fallbacks}")
        if kernels == 0 or compiled_kernels == 0:
            problems.append(f"no work: {kernels} kernels eager, {compiled_kernels} compiled")
        compare(eager, {"outputs": outputs, "gradients": gradients})
    except StopIteration:  # eager only: done
        pass
    except Mismatch as error:
        problems.append(f"mismatch: {error}")
    except Exception as error:
        traceback.print_exc()
        first_line = (str(error).strip().splitlines() or [""])[0]
        problems.append(f"{stage}: {type(error).__name__}: {first_line}"[:400])
    result = {"name": name, "verdict": "FAIL" if problems else "PASS", "routes": dict(ROUTES)}
    result["reason"] = "; ".join(problems) or f"outputs and {len(gradients)} gradients equal"
    result["graph_breaks"] = sum(counters["graph_break"].values())
    return result


def run_in_subprocess(name, timeout_s, eager_only=False):
    """Runs one model in a fresh interpreter: a crash or a hang is that model's failure only."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "error"}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--one", name, *(["--eager"] if eager_only else [])],
            capture_output=True, text=True, env=environment, timeout=timeout_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        result = {"name": name, "verdict": "FAIL", "reason": f"timed out after {timeout_s} s", "routes": {}}
    else:
        lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if lines:
            result = json.loads(lines[-1][len(RESULT_PREFIX) :])
        else:
            tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
            result = {"name": name, "verdict": "FAIL", "reason": f"exit {done.returncode}: {tail[0]}", "routes": {}}
    result["family"] = ZOO[name][0]
    result["wall_s"] = time.perf_counter() - started
    return result


def report_line(result):
    routes = Counter("fused" if route.startswith("fused") else "interpreted" for route in result["routes"].values())
    breaks = result.get("graph_breaks", "?")
    return (
        f"{result['name']:<10} {result['family']:<16} {result['verdict']:<4}  fused {routes['fused']:>3}  "
        f"interpreted {routes['interpreted']:>3}  breaks {breaks:>2}  {result['wall_s']:6.1f} s  {result['reason']}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"some of: {', '.join(ZOO)} (default: all)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per model")
    parser.add_argument("-v", "--verbose", action="store_true", help="list why kernels ran op by op")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--one", metavar="MODEL", help="run one model in this process (tracebacks on stderr)")
    parser.add_argument("--smoke", action="store_true", help=f"only {', '.join(SMOKE_MODELS)} (seconds, not minutes)")
    parser.add_argument("--eager", action="store_true", help="eager mode only (against the CPU), no torch.compile")
    arguments = parser.parse_args()
    if arguments.one:
        print(RESULT_PREFIX + json.dumps(run_one(arguments.one, arguments.eager)), flush=True)
        return
    if arguments.list:
        print("\n".join(f"{name:<10} {family}" for name, (family, _) in ZOO.items()))
        return
    unknown = [name for name in arguments.models if name not in ZOO]
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {list(ZOO)}")
    passed = 0
    names = arguments.models or (SMOKE_MODELS if arguments.smoke else list(ZOO))
    for name in names:
        result = run_in_subprocess(name, arguments.timeout, arguments.eager)
        passed += result["verdict"] == "PASS"
        print(report_line(result), flush=True)
        if arguments.verbose:
            reasons = Counter(route for route in result["routes"].values() if not route.startswith("fused"))
            for why, count in reasons.most_common():
                print(f"    {count} x {why}")
    print(f"\npass rate: {passed}/{len(names)} ({100 * passed / len(names):.0f}%)")
    if passed < len(names):
        sys.exit(1)


if __name__ == "__main__":
    main()
