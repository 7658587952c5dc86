// Connectionist temporal classification loss (nn.functional.ctc_loss: wav2vec2's training loss) on float32 log
// probabilities, composed from native kernels. Graves' forward variables alpha over the extended target (a blank
// before, between and after the labels) are computed in log space, one fused kernel per frame over the whole batch;
// the backward computes the backward variables beta the same way, frame by frame from each sequence's end, and the
// gradient from alpha beta summed per class, exactly as PyTorch's CPU kernel defines it. The targets and lengths are
// read on the host to build the extended labels (small integer tables); invalid arguments take the CPU's kernel, so
// that its errors are raised, as do other dtypes.
#include <ATen/TensorOperators.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

#include "bridge.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;
using isa::ElementType;

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

// The extended targets of a batch and the tables the recursions read, on the device. State s of sequence b is the
// blank for even s and label (s - 1) / 2 for odd s, s < states = 2 max(target_lengths) + 1.
struct Extended {
  int64_t batch = 0, states = 0;
  std::vector<int64_t> input_lengths, target_lengths;
  at::Tensor labels;      // [B, S] int64: each state's class
  at::Tensor skip_from;   // [B, S] bool: s is reached from s - 2 too (a label unlike the one before it)
  at::Tensor skip_to;     // [B, S] bool: s reaches s + 2 (skip_from of s + 2)
  at::Tensor valid;       // [B, S] bool: s <= 2 target_length
  at::Tensor last_state;  // [B, S] bool: one of the two states a path may end in (2L, and 2L - 1 when L > 0)
};

// Whether npusim computes the loss: float32 log probabilities on the device, and arguments the CPU kernel accepts
// (others go to it, which raises its own error).
bool valid_arguments(const at::Tensor& log_probs, const at::Tensor& targets, c10::IntArrayRef input_lengths,
                     c10::IntArrayRef target_lengths, int64_t blank) {
  if (log_probs.dim() != 3 || log_probs.scalar_type() != at::kFloat || !log_probs.is_privateuseone()) return false;
  const int64_t frames = log_probs.size(0), batch = log_probs.size(1), classes = log_probs.size(2);
  if (blank < 0 || blank >= classes || static_cast<int64_t>(input_lengths.size()) != batch ||
      static_cast<int64_t>(target_lengths.size()) != batch || at::isFloatingType(targets.scalar_type()) ||
      targets.is_complex() || (targets.dim() != 1 && targets.dim() != 2) || batch == 0)
    return false;
  int64_t total = 0;
  for (int64_t b = 0; b < batch; ++b) {
    if (input_lengths[b] < 0 || input_lengths[b] > frames || target_lengths[b] < 0) return false;
    if (targets.dim() == 2 && (targets.size(0) != batch || target_lengths[b] > targets.size(1))) return false;
    total += target_lengths[b];
  }
  return targets.dim() == 2 || targets.size(0) >= total;
}

Extended extend(const at::Tensor& targets, c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths,
                int64_t blank, const at::Device& device) {
  Extended e;
  e.batch = static_cast<int64_t>(input_lengths.size());
  e.input_lengths = input_lengths.vec();
  e.target_lengths = target_lengths.vec();
  const int64_t longest = *std::max_element(e.target_lengths.begin(), e.target_lengths.end());
  e.states = 2 * longest + 1;
  const at::Tensor host = targets.to(at::kCPU, at::kLong).contiguous();
  const int64_t* values = host.data_ptr<int64_t>();
  const size_t size = static_cast<size_t>(e.batch * e.states);
  std::vector<int64_t> labels(size, blank);
  std::vector<bool> skip_from(size), skip_to(size), valid(size), last_state(size);
  for (int64_t b = 0, offset = 0; b < e.batch; ++b) {
    const int64_t length = e.target_lengths[b];
    const int64_t first = targets.dim() == 2 ? b * host.size(1) : offset;  // concatenated targets follow each other
    const size_t row = static_cast<size_t>(b * e.states);
    for (int64_t k = 0; k < length; ++k) {
      const size_t s = row + static_cast<size_t>(2 * k + 1);
      labels[s] = values[first + k];
      skip_from[s] = k > 0 && values[first + k] != values[first + k - 1];
      if (k > 0) skip_to[s - 2] = skip_from[s];
    }
    for (int64_t s = 0; s <= 2 * length; ++s) valid[row + static_cast<size_t>(s)] = true;
    last_state[row + static_cast<size_t>(2 * length)] = true;
    if (length > 0) last_state[row + static_cast<size_t>(2 * length - 1)] = true;
    offset += length;
  }
  const auto table = [&](const std::vector<bool>& flags) {
    return TensorKernel::table(flags, at::kBool, device).view({e.batch, e.states});
  };
  e.labels = TensorKernel::table(labels, at::kLong, device).view({e.batch, e.states});
  e.skip_from = table(skip_from);
  e.skip_to = table(skip_to);
  e.valid = table(valid);
  e.last_state = table(last_state);
  return e;
}

// log(exp(a) + exp(b) + exp(c)) as kernel nodes, shifted by the largest (by 0 when all are -inf, which gives -inf).
int log_sum_exp(TensorKernel& k, int a, int b, int c) {
  const int largest = k.op(FusedOpcode::Maximum, k.op(FusedOpcode::Maximum, a, b), c);
  const int none = k.op(FusedOpcode::Eq, largest, k.constant(kMinusInfinity), -1, ElementType::Bool);
  const int shift = k.op(FusedOpcode::Where, none, k.constant(0), largest);
  const auto term = [&](int x) { return k.op(FusedOpcode::Exp, k.op(FusedOpcode::Sub, x, shift)); };
  const int sum = k.op(FusedOpcode::Add, k.op(FusedOpcode::Add, term(a), term(b)), term(c));
  return k.op(FusedOpcode::Add, k.op(FusedOpcode::Log, sum), shift);
}

// Each state's class at each frame, [T, B, S].
at::Tensor labels_per_frame(const Extended& e, int64_t frames) {
  return e.labels.unsqueeze(0).expand({frames, e.batch, e.states});
}

// Each state's log probability at each frame: log_probs[t, b, labels[b, s]], [T, B, S].
at::Tensor label_log_probs(const at::Tensor& log_probs, const Extended& e) {
  return log_probs.gather(2, labels_per_frame(e, log_probs.size(0)));
}

// alpha in frames 1..T of a [T + 1, B, S + 2] buffer of -inf: frame 0 is a virtual one before the first, holding
// log 1 in state 0, and two columns of -inf before state 0 make s - 1 and s - 2 readable everywhere.
// alpha[t, s] = log_sum_exp(alpha[t - 1, s], alpha[t - 1, s - 1], alpha[t - 1, s - 2] where skip_from) + lp[t, s].
at::Tensor forward_variables(const at::Tensor& lp, const Extended& e) {
  const int64_t frames = lp.size(0), width = e.states + 2, frame = e.batch * width;
  at::Tensor alpha = at::empty({frames + 1, e.batch, width}, lp.options());
  alpha.fill_(kMinusInfinity);
  alpha.select(0, 0).select(1, 2).fill_(0);
  const std::vector<int64_t> state{width, 1}, table{e.states, 1};
  for (int64_t t = 1; t <= frames; ++t) {
    TensorKernel k("ctc_alpha_f32", {e.batch, e.states}, 0);
    const int64_t previous = (t - 1) * frame;
    const int skipped = k.op(FusedOpcode::Where, k.load(e.skip_from, table), k.load(alpha, state, previous),
                             k.constant(kMinusInfinity));
    const int sum = log_sum_exp(k, k.load(alpha, state, previous + 2), k.load(alpha, state, previous + 1), skipped);
    const int value = k.op(FusedOpcode::Add, sum, k.load(lp, table, (t - 1) * e.batch * e.states));
    k.store(k.op(FusedOpcode::Where, k.load(e.valid, table), value, k.constant(kMinusInfinity)), alpha, state,
            t * frame + 2);
    TORCH_CHECK(k.launch(lp), "npusim: the CTC loss's forward kernel could not be built");
  }
  return alpha;
}

// beta in frames 0..T - 1 of a [T + 1, B, S + 2] buffer of -inf (frame T and the two columns after the last state
// stay -inf). Sequence b starts at its last frame T_b - 1 in its last two states, and is -inf after it:
// beta[t, s] = log_sum_exp(beta[t + 1, s], beta[t + 1, s + 1], beta[t + 1, s + 2] where skip_to) + lp[t, s].
at::Tensor backward_variables(const at::Tensor& lp, const Extended& e) {
  const int64_t frames = lp.size(0), width = e.states + 2, frame = e.batch * width;
  at::Tensor beta = at::empty({frames + 1, e.batch, width}, lp.options());
  beta.fill_(kMinusInfinity);
  std::vector<bool> last_frame(static_cast<size_t>(frames * e.batch)), before_last(last_frame.size());
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t b = 0; b < e.batch; ++b) {
      last_frame[static_cast<size_t>(t * e.batch + b)] = t == e.input_lengths[b] - 1;
      before_last[static_cast<size_t>(t * e.batch + b)] = t < e.input_lengths[b] - 1;
    }
  const at::Tensor is_last = TensorKernel::table(last_frame, at::kBool, lp.device());
  const at::Tensor is_before = TensorKernel::table(before_last, at::kBool, lp.device());
  const std::vector<int64_t> state{width, 1}, table{e.states, 1}, per_sequence{1, 0};
  for (int64_t t = frames - 1; t >= 0; --t) {
    TensorKernel k("ctc_beta_f32", {e.batch, e.states}, 0);
    const int64_t next = (t + 1) * frame;
    const int lp_t = k.load(lp, table, t * e.batch * e.states);
    const int skipped =
        k.op(FusedOpcode::Where, k.load(e.skip_to, table), k.load(beta, state, next + 2), k.constant(kMinusInfinity));
    const int step =
        k.op(FusedOpcode::Add, log_sum_exp(k, k.load(beta, state, next), k.load(beta, state, next + 1), skipped), lp_t);
    const int start = k.op(FusedOpcode::Where, k.load(e.last_state, table), lp_t, k.constant(kMinusInfinity));
    const int inside =
        k.op(FusedOpcode::Where, k.load(is_before, per_sequence, t * e.batch), step, k.constant(kMinusInfinity));
    const int value = k.op(FusedOpcode::Where, k.load(is_last, per_sequence, t * e.batch), start, inside);
    k.store(k.op(FusedOpcode::Where, k.load(e.valid, table), value, k.constant(kMinusInfinity)), beta, state,
            t * frame);
    TORCH_CHECK(k.launch(lp), "npusim: the CTC loss's backward kernel could not be built");
  }
  return beta;
}

at::Tensor zeroed_where_infinite(const at::Tensor& values, const at::Tensor& nll, bool zero_infinity) {
  return zero_infinity ? at::where(nll == std::numeric_limits<double>::infinity(), 0.0, values) : values;
}

std::tuple<at::Tensor, at::Tensor> npusim_ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  if (!valid_arguments(log_probs, targets, input_lengths, target_lengths, blank)) {
    torch::jit::Stack stack{log_probs, targets, input_lengths.vec(), target_lengths.vec(), blank, zero_infinity};
    call_cpu_fallback("aten::_ctc_loss", "", stack);
    return {stack[0].toTensor(), stack[1].toTensor()};
  }
  const Extended e = extend(targets, input_lengths, target_lengths, blank, log_probs.device());
  const int64_t frames = log_probs.size(0), width = e.states + 2;
  const at::Tensor alpha = forward_variables(label_log_probs(log_probs, e), e);
  // -log p = -log_sum_exp(alpha[T_b - 1] in the last two states); the second is a -inf column when L_b = 0.
  std::vector<int64_t> end(static_cast<size_t>(e.batch)), before_end(end.size());
  for (int64_t b = 0; b < e.batch; ++b) {
    const int64_t at = (e.input_lengths[b] * e.batch + b) * width + 2 + 2 * e.target_lengths[b];
    end[static_cast<size_t>(b)] = at;
    before_end[static_cast<size_t>(b)] = at - 1;
  }
  const at::Tensor flat = alpha.view({-1});
  const at::Tensor ends =
      at::stack({flat.index_select(0, TensorKernel::table(end, at::kLong, log_probs.device())),
                 flat.index_select(0, TensorKernel::table(before_end, at::kLong, log_probs.device()))});
  const at::Tensor minus_log_p = -at::logsumexp(ends, 0);
  const at::Tensor nll = zeroed_where_infinite(minus_log_p, minus_log_p, zero_infinity);
  const at::Tensor log_alpha = alpha.narrow(0, 1, frames).narrow(2, 2, e.states).permute({1, 0, 2}).contiguous();
  return {nll, log_alpha};
}

at::Tensor npusim_ctc_loss_backward(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                    c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths,
                                    const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  if (!valid_arguments(log_probs, targets, input_lengths, target_lengths, blank) ||
      grad.device() != log_probs.device() || neg_log_likelihood.device() != log_probs.device() ||
      log_alpha.device() != log_probs.device()) {
    torch::jit::Stack stack{
        grad,      log_probs, targets,      input_lengths.vec(), target_lengths.vec(), neg_log_likelihood,
        log_alpha, blank,     zero_infinity};
    call_cpu_fallback("aten::_ctc_loss_backward", "", stack);
    return stack[0].toTensor();
  }
  const Extended e = extend(targets, input_lengths, target_lengths, blank, log_probs.device());
  const int64_t frames = log_probs.size(0);
  const at::Tensor beta = backward_variables(label_log_probs(log_probs, e), e);
  // log of sum over the states of each class of alpha beta, per frame: [T, B, C]
  const at::Tensor products = log_alpha.permute({1, 0, 2}) + beta.narrow(0, 0, frames).narrow(2, 0, e.states);
  const at::Tensor largest = at::amax(products, {2}, /*keepdim=*/true);
  const at::Tensor shift = at::where(largest == kMinusInfinity, 0.0, largest);
  at::Tensor sums = at::zeros(log_probs.sizes(), log_probs.options());
  sums.scatter_add_(2, labels_per_frame(e, frames), (products - shift).exp());
  const at::Tensor per_class = sums.log() + shift;
  const at::Tensor nll = neg_log_likelihood.view({1, e.batch, 1});
  at::Tensor result = (log_probs.exp() - (per_class + nll - log_probs).exp()) * grad.view({1, e.batch, 1});
  std::vector<bool> inside(static_cast<size_t>(frames * e.batch));  // frames past a sequence's end get no gradient
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t b = 0; b < e.batch; ++b) inside[static_cast<size_t>(t * e.batch + b)] = t < e.input_lengths[b];
  const at::Tensor in_sequence = TensorKernel::table(inside, at::kBool, log_probs.device()).view({frames, e.batch, 1});
  result = at::where(in_sequence, result, 0.0);
  return zeroed_where_infinite(result, nll, zero_infinity);
}

std::vector<int64_t> lengths_on_host(const at::Tensor& lengths) {
  const at::Tensor host = lengths.to(at::kCPU, at::kLong).contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
}

std::tuple<at::Tensor, at::Tensor> npusim_ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                          const at::Tensor& input_lengths,
                                                          const at::Tensor& target_lengths, int64_t blank,
                                                          bool zero_infinity) {
  return npusim_ctc_loss(log_probs, targets, lengths_on_host(input_lengths), lengths_on_host(target_lengths), blank,
                         zero_infinity);
}

at::Tensor npusim_ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs,
                                           const at::Tensor& targets, const at::Tensor& input_lengths,
                                           const at::Tensor& target_lengths, const at::Tensor& neg_log_likelihood,
                                           const at::Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  return npusim_ctc_loss_backward(grad, log_probs, targets, lengths_on_host(input_lengths),
                                  lengths_on_host(target_lengths), neg_log_likelihood, log_alpha, blank, zero_infinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", npusim_ctc_loss);
  m.impl("_ctc_loss.Tensor", npusim_ctc_loss_tensor);
  m.impl("_ctc_loss_backward", npusim_ctc_loss_backward);
  m.impl("_ctc_loss_backward.Tensor", npusim_ctc_loss_backward_tensor);
}

}  // namespace npusim::bridge
