// npusim._C's face for torch.compile (npusim/inductor): a compiled kernel's program arrives as plain Python data,
// becomes an emitter::FusedSpec once per program and size, and each launch builds (once, through the kernel cache)
// and runs the fused kernel on the tensors' device.
#include <torch/extension.h>

#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <utility>

#include "aten/bridge.h"
#include "npusim/emitter/fused.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

namespace py = pybind11;
using emitter::FusedOpcode;

// The names Python writes (npusim/inductor/lowering.py), one per opcode.
constexpr auto kOpcodeNames = std::to_array<std::pair<std::string_view, FusedOpcode>>({
    {"Load", FusedOpcode::Load},
    {"Constant", FusedOpcode::Constant},
    {"Argument", FusedOpcode::Argument},
    {"Neg", FusedOpcode::Neg},
    {"Abs", FusedOpcode::Abs},
    {"Exp", FusedOpcode::Exp},
    {"Log", FusedOpcode::Log},
    {"Tanh", FusedOpcode::Tanh},
    {"Sigmoid", FusedOpcode::Sigmoid},
    {"Erf", FusedOpcode::Erf},
    {"Sqrt", FusedOpcode::Sqrt},
    {"Rsqrt", FusedOpcode::Rsqrt},
    {"Reciprocal", FusedOpcode::Reciprocal},
    {"Sin", FusedOpcode::Sin},
    {"Cos", FusedOpcode::Cos},
    {"Log1p", FusedOpcode::Log1p},
    {"Expm1", FusedOpcode::Expm1},
    {"Floor", FusedOpcode::Floor},
    {"Ceil", FusedOpcode::Ceil},
    {"Round", FusedOpcode::Round},
    {"Trunc", FusedOpcode::Trunc},
    {"Not", FusedOpcode::Not},
    {"Convert", FusedOpcode::Convert},
    {"Add", FusedOpcode::Add},
    {"Sub", FusedOpcode::Sub},
    {"Mul", FusedOpcode::Mul},
    {"Div", FusedOpcode::Div},
    {"Fmod", FusedOpcode::Fmod},
    {"Maximum", FusedOpcode::Maximum},
    {"Minimum", FusedOpcode::Minimum},
    {"And", FusedOpcode::And},
    {"Or", FusedOpcode::Or},
    {"Xor", FusedOpcode::Xor},
    {"Eq", FusedOpcode::Eq},
    {"Ne", FusedOpcode::Ne},
    {"Lt", FusedOpcode::Lt},
    {"Le", FusedOpcode::Le},
    {"Gt", FusedOpcode::Gt},
    {"Ge", FusedOpcode::Ge},
    {"Where", FusedOpcode::Where},
    {"MulAdd", FusedOpcode::MulAdd},
    {"ReduceSum", FusedOpcode::ReduceSum},
    {"ReduceMax", FusedOpcode::ReduceMax},
    {"ReduceMin", FusedOpcode::ReduceMin},
    {"ReduceArgMax", FusedOpcode::ReduceArgMax},
    {"ReduceArgMin", FusedOpcode::ReduceArgMin},
    {"Store", FusedOpcode::Store},
    {"Product", FusedOpcode::Product},
    {"Gather", FusedOpcode::Gather},
    {"ScatterAdd", FusedOpcode::ScatterAdd},
    {"CheckIndex", FusedOpcode::CheckIndex},
    {"RandomUniform", FusedOpcode::RandomUniform},
    {"RandomNormal", FusedOpcode::RandomNormal},
});

FusedOpcode opcode_named(const std::string& name) {
  for (const auto& [known, opcode] : kOpcodeNames)
    if (known == name) return opcode;
  throw std::invalid_argument(c10::str("fused kernel: unknown operation ", name));
}

isa::ElementType type_named(const std::string& name) {
  const auto type = isa::find_element_type(name);
  if (!type) throw std::invalid_argument(c10::str("fused kernel: unknown element type ", name));
  return *type;
}

// (argument, type, offset, strides)
emitter::FusedAccess access_from(const py::tuple& t) {
  return {t[0].cast<int>(), type_named(t[1].cast<std::string>()), t[2].cast<int64_t>(),
          t[3].cast<std::vector<int64_t>>()};
}

// (a_argument, b_argument, type, batch, m, n, k, a_offset, a_batch, a_row, a_col, b_offset, b_batch, b_row, b_col)
emitter::FusedMatmul matmul_from(const py::tuple& t) {
  emitter::FusedMatmul matmul;
  matmul.a_argument = t[0].cast<int>();
  matmul.b_argument = t[1].cast<int>();
  matmul.type = type_named(t[2].cast<std::string>());
  int64_t* fields[] = {&matmul.batch,    &matmul.m,       &matmul.n,     &matmul.k,
                       &matmul.a_offset, &matmul.a_batch, &matmul.a_row, &matmul.a_col,
                       &matmul.b_offset, &matmul.b_batch, &matmul.b_row, &matmul.b_col};
  for (size_t i = 0; i < std::size(fields); ++i) *fields[i] = t[3 + i].cast<int64_t>();
  return matmul;
}

// (name, sizes, reduced_dims, arguments, loads, stores, nodes, matmul or None[, segments]); a node is (op, type, a,
// b, c, access, constant[, argument]) and a segment (elements, first_argument).
emitter::FusedSpec spec_from(const py::tuple& t) {
  emitter::FusedSpec spec;
  spec.name = t[0].cast<std::string>();
  spec.sizes = t[1].cast<std::vector<int64_t>>();
  spec.reduced_dims = t[2].cast<int>();
  spec.arguments = t[3].cast<int>();
  for (const auto& load : t[4].cast<py::list>()) spec.loads.push_back(access_from(load.cast<py::tuple>()));
  for (const auto& store : t[5].cast<py::list>()) spec.stores.push_back(access_from(store.cast<py::tuple>()));
  for (const auto& item : t[6].cast<py::list>()) {
    const auto node = item.cast<py::tuple>();
    spec.nodes.push_back({opcode_named(node[0].cast<std::string>()), type_named(node[1].cast<std::string>()),
                          node[2].cast<int>(), node[3].cast<int>(), node[4].cast<int>(), node[5].cast<int>(),
                          node[6].cast<double>(), node.size() > 7 ? node[7].cast<int>() : -1});
  }
  if (!t[7].is_none()) spec.matmul = matmul_from(t[7].cast<py::tuple>());
  if (t.size() > 8)
    for (const auto& item : t[8].cast<py::list>()) {
      const auto segment = item.cast<py::tuple>();
      spec.segments.push_back({segment[0].cast<int64_t>(), segment[1].cast<int>()});
    }
  return spec;
}

// Launches the fused kernel on the tensors (the argument block, in order; all on one device). False when the
// emitter cannot express the program: the caller runs it another way.
// The argument block's entries, in order: a tensor's address, a float's f32 bits (an Argument node's value: a host
// scalar computed at launch), or an int as it is (0 for a host tensor the kernel does not read).
bool launch(const emitter::FusedSpec& spec, const py::list& arguments) {
  int expected = spec.arguments;  // with segments, each segment's entries from its first one
  for (const emitter::FusedSegment& segment : spec.segments)
    expected = std::max(expected, segment.first_argument + spec.arguments);
  TORCH_CHECK(static_cast<int>(arguments.size()) == expected, "compiled kernel ", spec.name, " takes ", expected,
              " arguments, ", arguments.size(), " given");
  std::optional<c10::Device> device;
  std::vector<uint64_t> addresses;
  for (const py::handle& argument : arguments) {
    if (py::isinstance<py::float_>(argument)) {
      addresses.push_back(std::bit_cast<uint32_t>(argument.cast<float>()));
    } else if (py::isinstance<py::int_>(argument)) {
      addresses.push_back(static_cast<uint64_t>(argument.cast<int64_t>()));
    } else {
      const auto tensor = argument.cast<at::Tensor>();
      if (!device) device = tensor.device();
      TORCH_CHECK(tensor.device() == *device, "compiled kernel ", spec.name, ": tensors on ", *device, " and ",
                  tensor.device());
      addresses.push_back(tensor.numel() == 0 ? 0 : device_address(tensor));
    }
  }
  TORCH_CHECK(device.has_value(), "compiled kernel ", spec.name, " has no tensor arguments");
  runtime::Device& runtime = runtime_device(device->index());
  const auto run = [&] { launch_fused(device->index(), runtime, spec, addresses); };
  // A kernel that checks indices raises PyTorch's IndexError for one out of range, as the indexing operator does.
  const bool checks = std::any_of(spec.nodes.begin(), spec.nodes.end(),
                                  [](const emitter::FusedNode& node) { return node.op == FusedOpcode::CheckIndex; });
  return checks ? launched_checking_indices(runtime, run, "index out of range in self") : launched_natively(run);
}

}  // namespace

void register_compiled_kernels(py::module& m) {
  py::class_<emitter::FusedSpec>(m, "FusedSpec")
      .def(py::init(&spec_from), py::arg("description"))
      .def_readonly("name", &emitter::FusedSpec::name);
  m.def("launch_fused", &launch, py::arg("spec"), py::arg("arguments"));
}

}  // namespace npusim::bridge
