// npusim._native: Python bindings to the torch-free layers: the ISA toolchain and a simulated chip driven directly
// (load programs, move bytes, launch, read registers and statistics). Kept apart from npusim._C so that it builds
// without torch's headers and works without the PyTorch backend. It has its own copy of the runtime: a process can
// still build one timed (SystemC) chip in all, here or in the PyTorch device.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <filesystem>

#include <cstring>
#include <string>
#include <vector>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"
#include "npusim/isa/isa.h"
#include "npusim/runtime/device.h"

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

py::dict record_dict(const runtime::CommandRecord& record) {
  py::dict stats;
#define NPUSIM_STATISTIC(name, unit, doc) stats[#name] = record.stats.name;
#include "npusim/emulator/statistics.def"
#undef NPUSIM_STATISTIC
  return py::dict(py::arg("name") = record.name, py::arg("cores") = record.cores,
                  py::arg("kernel_cycles") = record.kernel_cycles, py::arg("device_cycles") = record.device_cycles,
                  py::arg("instructions") = record.instructions(), py::arg("bytes") = record.bytes,
                  py::arg("first_hazard") = record.first_hazard, py::arg("stats") = stats);
}

// A device of one configuration and mode, with the GIL released while it simulates.
class NativeDevice {
 public:
  NativeDevice(const std::string& config, const std::string& mode, const std::vector<std::string>& config_dirs)
      : device_(load(config, config_dirs), runtime::parse_mode(mode)) {}

  uint64_t allocate(uint64_t bytes) { return device_.allocate(bytes); }
  void free(uint64_t address) { device_.free(address); }
  void write(uint64_t address, const py::buffer& data) {
    const py::buffer_info info = data.request();
    const auto bytes = static_cast<uint64_t>(info.size * info.itemsize);
    check_range("write", address, bytes);
    py::gil_scoped_release released;
    device_.copy_host_to_device(address, info.ptr, bytes);
  }
  py::bytes read(uint64_t address, uint64_t bytes) {
    check_range("read", address, bytes);  // before the host buffer: a wild size must not allocate gigabytes
    std::string data(bytes, '\0');
    {
      py::gil_scoped_release released;
      device_.copy_device_to_host(data.data(), address, bytes);
    }
    return py::bytes(data);
  }
  uint64_t load_program(const py::bytes& image) { return device_.load_program(words_of(image)); }
  py::dict launch(const std::string& name, uint64_t program, const std::vector<uint64_t>& arguments,
                  uint64_t core_mask) {
    std::vector<runtime::CommandRecord> records;
    {
      py::gil_scoped_release released;
      device_.take_records();  // this launch's record is then the only kernel record
      device_.launch(name, program, arguments, core_mask);
      device_.synchronize();  // a trap is raised here, at its launch
      records = device_.take_records();
    }
    for (const runtime::CommandRecord& record : records)
      if (record.name == name) return record_dict(record);
    throw std::logic_error("the launch left no record");
  }
  std::array<uint64_t, isa::kRegisterCount> registers(int core) {
    py::gil_scoped_release released;
    return device_.core_registers(core);
  }
  uint64_t elapsed_cycles() {
    py::gil_scoped_release released;
    return device_.elapsed_cycles();
  }

 private:
  // IndexError in Python, at once, for bytes the device's memory does not have.
  void check_range(const char* what, uint64_t address, uint64_t bytes) const {
    const uint64_t capacity = device_.config().dram_capacity_bytes();
    if (address > capacity || bytes > capacity - address)
      throw std::out_of_range(fmt::format("{} of {} bytes at 0x{:x}: outside the device's {} bytes of memory", what,
                                          bytes, address, capacity));
  }
  static config::ChipConfig load(const std::string& name_or_path, const std::vector<std::string>& dirs) {
    return config::load_config(name_or_path, std::vector<std::filesystem::path>(dirs.begin(), dirs.end()));
  }
  runtime::Device device_;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "npusim's torch-free native layers";
  py::register_exception<isa::AssemblyError>(m, "AssemblyError", PyExc_ValueError);
  py::register_exception<isa::IllegalInstruction>(m, "IllegalInstruction", PyExc_ValueError);
  m.def("assemble", &assemble, py::arg("source"), py::arg("file_name"), py::arg("include_dirs"));
  m.def("disassemble", [](const py::bytes& image) { return isa::disassemble_program(words_of(image)); });
  m.def("decode", [](uint64_t word) { return isa::disassemble(isa::decode(word), 0); });
  m.def("instruction_table", &instruction_table);

  py::register_exception<runtime::DeviceError>(m, "DeviceError", PyExc_RuntimeError);
  py::register_exception<config::ConfigError>(m, "ConfigError", PyExc_ValueError);
  py::class_<NativeDevice>(m, "Device")
      .def(py::init<const std::string&, const std::string&, const std::vector<std::string>&>(), py::arg("config"),
           py::arg("mode"), py::arg("config_dirs"))
      .def("allocate", &NativeDevice::allocate)
      .def("free", &NativeDevice::free)
      .def("write", &NativeDevice::write)
      .def("read", &NativeDevice::read)
      .def("load_program", &NativeDevice::load_program)
      .def("launch", &NativeDevice::launch)
      .def("registers", &NativeDevice::registers)
      .def("elapsed_cycles", &NativeDevice::elapsed_cycles);
}
