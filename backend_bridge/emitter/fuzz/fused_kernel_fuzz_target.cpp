// Fuzz target for the kernel emitter and the kernel builder: a fuzz input is read as a fused kernel's spec (an
// iteration space with reduced dimensions, strided and broadcast loads of f32, f16, bf16 and i32, a graph of pointwise
// operations, conversions, comparisons, selections and reductions, and stores of full or per-row values), which
// emit_fused either refuses with a clear error (std::invalid_argument, Unsupported, BuildError) or builds into a
// kernel. A built kernel then runs on a functional and a timed device with the same random buffers, and must finish
// without a trap (the specs made here neither check indices nor divide integers), with no hazard in the timed model,
// and with bit-identical buffers in both modes. Anything else (another exception, a trap, a hazard, a difference)
// aborts with the spec printed: what the program fuzz targets cannot reach, a wrong program from the builder, shows
// here. The rows are sometimes longer than the small scratchpad holds, so looped-row kernels are built too.
//
// SystemC elaborates one design per process, so the devices are built once and every input runs on them.
// NPUSIM_FUZZ_VERBOSE=1 prints what each input became (refused, and why, or the kernel's description), to see what the
// inputs reach.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "npusim/emitter/fused.h"
#include "npusim/runtime/device.h"

namespace {

using npusim::emitter::FusedAccess;
using npusim::emitter::FusedNode;
using npusim::emitter::FusedSpec;
using Op = npusim::emitter::FusedOpcode;
using npusim::isa::ElementType;

// The input's bytes in order, then zeros.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  int pick(int choices) { return static_cast<int>((at_ < size_ ? data_[at_++] : 0) % choices); }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
};

// Three cores and an 8 KiB scratchpad, so that tiles are small, work is shared and long rows are walked in chunks.
npusim::config::ChipConfig fuzz_chip() {
  npusim::config::ChipConfig config;
  config.dram_capacity_mib = 64;
  config.dram_channels = 1;
  config.chip_cores = 3;
  config.core_scratchpad_kib = 8;
  return config;
}

// A value of the spec being built: its node, and whether it is one value per row.
struct Value {
  int node;
  bool per_row;
};

class SpecMaker {
 public:
  explicit SpecMaker(Reader& in) : in_(in) {}

  FusedSpec make() {
    spec_.name = "fuzzed";
    const int dims = 1 + in_.pick(3);
    for (int d = 0; d < dims; ++d) spec_.sizes.push_back(1 + in_.pick(d + 1 == dims ? 40 : 6));
    if (in_.pick(5) == 0) spec_.sizes.back() = 600 + 8 * in_.pick(256);  // a row the scratchpad may not hold
    spec_.reduced_dims = in_.pick(std::min(dims, 2) + 1);
    for (int k = 1 + in_.pick(3); k > 0; --k) values_.push_back(load());
    for (int k = 1 + in_.pick(10); k > 0; --k) values_.push_back(operation());
    // One or two stores, each into a buffer of its own: the last value, and perhaps another.
    store(values_.back());
    if (in_.pick(2) == 0) store(values_[in_.pick(static_cast<int>(values_.size()))]);
    spec_.arguments = static_cast<int>(spec_.loads.size() + spec_.stores.size());
    return spec_;
  }

 private:
  int dims() const { return static_cast<int>(spec_.sizes.size()); }
  int outer() const { return dims() - spec_.reduced_dims; }
  ElementType type_of(const Value& v) const { return spec_.nodes[v.node].type; }
  int add(FusedNode node) {
    spec_.nodes.push_back(node);
    return static_cast<int>(spec_.nodes.size()) - 1;
  }
  // Row-major strides of the space with the dimensions in `order` (the first the outermost); `zero` ones 0.
  std::vector<int64_t> strides(const std::vector<int>& order, const std::vector<bool>& zero) const {
    std::vector<int64_t> result(dims(), 0);
    int64_t stride = 1;
    for (auto d = order.rbegin(); d != order.rend(); ++d)
      if (!zero[*d]) {
        result[*d] = stride;
        stride *= spec_.sizes[*d];
      }
    return result;
  }
  std::vector<int> in_order() const {
    std::vector<int> order(dims());
    for (int d = 0; d < dims(); ++d) order[d] = d;
    return order;
  }

  Value load() {
    const ElementType types[] = {ElementType::F32, ElementType::F16, ElementType::BF16, ElementType::I32};
    FusedAccess access;
    access.argument = static_cast<int>(spec_.loads.size());
    access.type = types[in_.pick(4)];
    access.offset = in_.pick(3);
    std::vector<int> order = in_order();
    std::vector<bool> zero(dims(), false);
    switch (in_.pick(4)) {
      case 0: break;                                            // contiguous
      case 1: std::reverse(order.begin(), order.end()); break;  // transposed
      case 2:                                                   // broadcast along some dimensions
        for (int d = 0; d < dims(); ++d) zero[d] = in_.pick(2) == 0;
        break;
      default:  // one value per row
        for (int d = outer(); d < dims(); ++d) zero[d] = true;
    }
    access.strides = strides(order, zero);
    spec_.loads.push_back(access);
    bool per_row = true;  // as the emitter sees it: strides 0 over the reduced dimensions, whatever their sizes
    for (int d = outer(); d < dims(); ++d) per_row = per_row && access.strides[d] == 0;
    return {add({.op = Op::Load, .type = access.type, .access = static_cast<int>(spec_.loads.size()) - 1}), per_row};
  }

  Value pick_value() { return values_[in_.pick(static_cast<int>(values_.size()))]; }
  Value converted(Value v, ElementType type) {
    if (type_of(v) == type) return v;
    return {add({.op = Op::Convert, .type = type, .a = v.node}), v.per_row};
  }
  Value as_float(Value v) {
    const ElementType type = type_of(v);
    return type == ElementType::F32 || type == ElementType::F16 || type == ElementType::BF16
               ? v
               : converted(v, ElementType::F32);
  }
  // a and b in one type: as they are when they share it, else both in f32.
  std::pair<Value, Value> same_type(Value a, Value b) {
    if (type_of(a) == type_of(b)) return {a, b};
    return {converted(a, ElementType::F32), converted(b, ElementType::F32)};
  }

  Value operation() {
    switch (in_.pick(8)) {
      case 0: {  // a function of floats
        const Op ops[] = {Op::Neg,   Op::Abs,   Op::Exp,        Op::Log,  Op::Tanh,  Op::Sigmoid,
                          Op::Sqrt,  Op::Rsqrt, Op::Reciprocal, Op::Erf,  Op::Sin,   Op::Cos,
                          Op::Log1p, Op::Expm1, Op::Floor,      Op::Ceil, Op::Round, Op::Trunc};
        const Value x = as_float(pick_value());
        return {add({.op = ops[in_.pick(18)], .type = type_of(x), .a = x.node}), x.per_row};
      }
      case 1: {  // arithmetic; integers neither divide nor take a remainder (a zero divisor traps)
        const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Maximum, Op::Minimum, Op::Div, Op::Fmod};
        const Op op = ops[in_.pick(7)];
        std::pair<Value, Value> ab = same_type(pick_value(), pick_value());
        if (type_of(ab.first) == ElementType::Bool)
          ab = {converted(ab.first, ElementType::I32), converted(ab.second, ElementType::I32)};
        const ElementType type = type_of(ab.first);
        if ((op == Op::Div || op == Op::Fmod) && (type == ElementType::I32 || type == ElementType::I64))
          ab = {converted(ab.first, ElementType::F32), converted(ab.second, ElementType::F32)};
        const auto [a, b] = ab;
        return {add({.op = op, .type = type_of(a), .a = a.node, .b = b.node}), a.per_row && b.per_row};
      }
      case 2: {  // a comparison, and a selection by it
        const Op ops[] = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
        const auto [a, b] = same_type(as_float(pick_value()), as_float(pick_value()));
        const Value condition = {add({.op = ops[in_.pick(6)], .type = ElementType::Bool, .a = a.node, .b = b.node}),
                                 a.per_row && b.per_row};
        if (in_.pick(3) == 0) return condition;
        const auto [x, y] = same_type(pick_value(), pick_value());
        return {add({.op = Op::Where, .type = type_of(x), .a = condition.node, .b = x.node, .c = y.node}),
                condition.per_row && x.per_row && y.per_row};
      }
      case 3:
      case 4: {  // a reduction of a full row, sometimes taken from it again (x - max(x), as a softmax does)
        std::vector<Value> rows;
        for (const Value& v : values_)
          if (!v.per_row) rows.push_back(v);
        if (spec_.reduced_dims == 0 || rows.empty()) return converted(pick_value(), ElementType::F32);
        const Value row = as_float(rows[in_.pick(static_cast<int>(rows.size()))]);
        const Op ops[] = {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceArgMax, Op::ReduceArgMin};
        const Op op = ops[in_.pick(5)];
        const bool index = op == Op::ReduceArgMax || op == Op::ReduceArgMin;
        const Value reduced = {add({.op = op, .type = index ? ElementType::I64 : type_of(row), .a = row.node}), true};
        if (index || in_.pick(2) == 0) return reduced;
        return {add({.op = Op::Sub, .type = type_of(row), .a = row.node, .b = reduced.node}), false};
      }
      case 5: {  // a conversion
        const ElementType types[] = {ElementType::F32, ElementType::F16, ElementType::BF16,
                                     ElementType::I32, ElementType::I64, ElementType::Bool};
        return converted(pick_value(), types[in_.pick(6)]);
      }
      case 6: {  // a constant, combined with a value
        const double constants[] = {0.0, 1.0, -2.5, 0.5, 3e38, std::numeric_limits<double>::quiet_NaN()};
        const Value x = as_float(pick_value());
        const int constant = add({.op = Op::Constant, .type = type_of(x), .constant = constants[in_.pick(6)]});
        return {add({.op = in_.pick(2) ? Op::Mul : Op::Add, .type = type_of(x), .a = x.node, .b = constant}),
                x.per_row};
      }
      default: {  // a fused multiply-add of f32 values
        const Value a = converted(pick_value(), ElementType::F32), b = converted(pick_value(), ElementType::F32),
                    c = converted(pick_value(), ElementType::F32);
        return {add({.op = Op::MulAdd, .type = ElementType::F32, .a = a.node, .b = b.node, .c = c.node}),
                a.per_row && b.per_row && c.per_row};
      }
    }
  }

  // Into a buffer of its own: a full value over the whole space (in order or transposed), a per-row value one element
  // per row; in the value's type or converted to another.
  void store(Value v) {
    FusedAccess access;
    access.argument = static_cast<int>(spec_.loads.size() + spec_.stores.size());
    access.type = type_of(v);
    if (in_.pick(3) == 0) {
      const ElementType types[] = {ElementType::F32, ElementType::F16, ElementType::BF16, ElementType::I32};
      access.type = types[in_.pick(4)];
    }
    std::vector<int> order = in_order();
    std::vector<bool> zero(dims(), false);
    if (v.per_row)
      for (int d = outer(); d < dims(); ++d) zero[d] = true;
    else if (in_.pick(3) == 0)
      std::reverse(order.begin(), order.end());
    access.strides = strides(order, zero);
    spec_.stores.push_back(access);
    add({.op = Op::Store, .type = type_of(v), .a = v.node, .access = static_cast<int>(spec_.stores.size()) - 1});
  }

  Reader& in_;
  FusedSpec spec_;
  std::vector<Value> values_;
};

bool verbose() {
  static const bool on = std::getenv("NPUSIM_FUZZ_VERBOSE") != nullptr;
  return on;
}

// Elements an access reaches: one past its largest index.
int64_t extent(const FusedSpec& spec, const FusedAccess& access) {
  int64_t last = access.offset;
  for (size_t d = 0; d < spec.sizes.size(); ++d) last += (spec.sizes[d] - 1) * access.strides[d];
  return last + 1;
}

std::string describe(const FusedSpec& spec) {
  std::string text = fmt::format("space [{}], {} reduced\n", fmt::join(spec.sizes, ", "), spec.reduced_dims);
  for (const auto& [kind, accesses] : {std::pair{"load", &spec.loads}, std::pair{"store", &spec.stores}})
    for (const FusedAccess& access : *accesses)
      text += fmt::format("  {} argument {} {} offset {} strides [{}]\n", kind, access.argument,
                          npusim::isa::type_name(access.type), access.offset, fmt::join(access.strides, ", "));
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const FusedNode& node = spec.nodes[i];
    text += fmt::format("  {}: opcode {} {} a {} b {} c {} access {} constant {}\n", i, static_cast<int>(node.op),
                        npusim::isa::type_name(node.type), node.a, node.b, node.c, node.access, node.constant);
  }
  return text;
}

[[noreturn]] void fail(const FusedSpec& spec, const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n%s", what.c_str(), describe(spec).c_str());
  std::abort();
}

// Launches the kernel with the buffers and returns them afterwards.
std::vector<std::vector<uint8_t>> run(npusim::runtime::Device& device, const npusim::emitter::Kernel& kernel,
                                      const std::vector<std::vector<uint8_t>>& buffers) {
  std::vector<uint64_t> addresses;
  for (const auto& buffer : buffers) {
    addresses.push_back(device.allocate(buffer.size()));
    device.copy_host_to_device(addresses.back(), buffer.data(), buffer.size());
  }
  const uint64_t program = device.load_program(kernel.words);
  device.launch(kernel.name, program, addresses, (uint64_t{1} << kernel.cores) - 1);
  std::vector<std::vector<uint8_t>> result = buffers;
  for (size_t k = 0; k < buffers.size(); ++k)
    device.copy_device_to_host(result[k].data(), addresses[k], result[k].size());
  device.unload_program(program);
  for (uint64_t address : addresses) device.free(address);
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static npusim::runtime::Device functional(fuzz_chip(), npusim::runtime::Mode::Functional);
  static npusim::runtime::Device timed(fuzz_chip(), npusim::runtime::Mode::Timed);
  Reader in(data, size);
  const FusedSpec spec = SpecMaker(in).make();
  npusim::emitter::Kernel kernel;
  try {
    kernel = npusim::emitter::emit_fused(spec, fuzz_chip());
  } catch (const std::invalid_argument& refusal) {
    if (verbose()) std::fprintf(stderr, "invalid: %s\n", refusal.what());
    return 0;  // a spec the emitter refuses, naming the node
  } catch (const npusim::emitter::Unsupported& refusal) {
    if (verbose()) std::fprintf(stderr, "unsupported: %s\n", refusal.what());
    return 0;  // a spec the fused loop cannot express: the glue runs it another way
  } catch (const npusim::emitter::BuildError& refusal) {
    if (verbose()) std::fprintf(stderr, "build: %s\n", refusal.what());
    return 0;  // a kernel that cannot be built (registers, scratchpad), said so
  } catch (const std::exception& error) {
    fail(spec, fmt::format("emit_fused threw an unexpected {}", error.what()));
  }
  // Random bytes (NaNs and infinities among them) from a hash of the input, so that a file reproduces its run.
  uint64_t seed = 1469598103934665603ull;
  for (size_t k = 0; k < size; ++k) seed = (seed ^ data[k]) * 1099511628211ull;
  std::mt19937_64 random(seed);
  std::vector<std::vector<uint8_t>> buffers;
  for (const auto* accesses : {&spec.loads, &spec.stores})
    for (const FusedAccess& access : *accesses) {
      std::vector<uint8_t> buffer(extent(spec, access) * npusim::isa::element_bytes(access.type));
      for (uint8_t& byte : buffer) byte = static_cast<uint8_t>(random());
      buffers.push_back(std::move(buffer));
    }
  std::vector<std::vector<uint8_t>> functional_result, timed_result;
  try {
    functional_result = run(functional, kernel, buffers);
    timed_result = run(timed, kernel, buffers);
  } catch (const npusim::runtime::DeviceError& error) {
    fail(spec, fmt::format("the built kernel stopped: {}", error.what()));
  }
  for (const npusim::runtime::CommandRecord& record : timed.take_records())
    if (record.name == kernel.name && !record.first_hazard.empty())
      fail(spec, fmt::format("a hazard in the timed model: {}", record.first_hazard));
  functional.take_records();
  if (functional_result != timed_result) fail(spec, "the functional and timed results differ");
  if (verbose()) std::fprintf(stderr, "ran: %s\n", kernel.description.c_str());
  return 0;
}
