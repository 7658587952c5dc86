// npusim._native: Python bindings to the torch-free layers (the ISA toolchain). Kept apart from npusim._C so that it
// builds without torch's headers and loads without the PyTorch backend.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"
#include "npusim/isa/isa.h"

namespace py = pybind11;
using namespace npusim;

namespace {

py::bytes assemble(const std::string& source, const std::string& file_name,
                   const std::vector<std::string>& include_dirs) {
  isa::AssemblerOptions options;
  for (const std::string& dir : include_dirs) options.include_dirs.emplace_back(dir);
  const std::vector<uint64_t> words = isa::assemble(source, file_name, options);
  return py::bytes(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(uint64_t));
}

std::vector<uint64_t> words_of(const py::bytes& image) {
  const std::string bytes = image;
  if (bytes.size() % isa::kInstructionBytes != 0)
    throw py::value_error("a program image is a whole number of 8-byte words; got " + std::to_string(bytes.size()) +
                          " bytes");
  std::vector<uint64_t> words(bytes.size() / isa::kInstructionBytes);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

py::list instruction_table() {
  py::list rows;
  for (const isa::InstructionInfo& row : isa::kInstructionTable) {
    py::list types;
    for (int k = 0; k < isa::kElementTypeCount; ++k)
      if (isa::allowed_types(row.types) >> k & 1) types.append(std::string(isa::kElementTypeNames[k]));
    rows.append(py::dict(py::arg("name") = std::string(row.name), py::arg("mnemonic") = std::string(row.mnemonic),
                         py::arg("opcode") = static_cast<int>(row.opcode),
                         py::arg("operands") = std::string(row.operands), py::arg("types") = types,
                         py::arg("doc") = std::string(row.doc)));
  }
  return rows;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "npusim's torch-free native layers";
  py::register_exception<isa::AssemblyError>(m, "AssemblyError", PyExc_ValueError);
  py::register_exception<isa::IllegalInstruction>(m, "IllegalInstruction", PyExc_ValueError);
  m.def("assemble", &assemble, py::arg("source"), py::arg("file_name"), py::arg("include_dirs"));
  m.def("disassemble", [](const py::bytes& image) { return isa::disassemble_program(words_of(image)); });
  m.def("decode", [](uint64_t word) { return isa::disassemble(isa::decode(word), 0); });
  m.def("instruction_table", &instruction_table);
}
