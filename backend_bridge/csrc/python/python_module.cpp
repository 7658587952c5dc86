// npusim._C: the Python face of the runtime — choosing the chip, device properties, memory statistics, and the
// per-command records that performance reports are built from.
#include <torch/extension.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "aten/fallback_counts.h"
#include "npusim/runtime/session.h"
#include "runtime/device_generator.h"

namespace npusim::bridge {

void register_compiled_kernels(pybind11::module& m);  // compiled_kernels.cpp
void register_operator_names(pybind11::module& m);    // operator_names.cpp
void install_keyboard_interrupt_check();              // keyboard_interrupt.cpp

namespace {

namespace py = pybind11;

runtime::Device& device(int index) { return runtime::Session::instance().device(index); }

void init(const std::string& config, const std::string& mode, const std::vector<std::string>& config_dirs) {
  runtime::SessionOptions options;
  options.config = config;
  options.mode = runtime::parse_mode(mode);
  for (const auto& dir : config_dirs) options.config_dirs.emplace_back(dir);
  runtime::Session::instance().configure(options);
}

py::dict properties(int index) {
  const runtime::Device& d = device(index);
  const config::ChipConfig& c = d.config();
  py::dict result;
  result["name"] = "npusim " + c.name;
  result["config"] = c.name;
  result["config_source"] = c.source;
  result["mode"] = runtime::mode_name(d.mode());
  result["cores"] = c.chip_cores;
  result["clock_ghz"] = c.chip_clock_ghz;
  result["scratchpad_kib"] = c.core_scratchpad_kib;
  result["vector_lanes"] = c.core_vector_lanes;
  result["total_memory"] = c.dram_capacity_bytes();
  result["dram_bandwidth_gbps"] = c.dram_bandwidth_gbps;
  return result;
}

py::dict statistics_of(const emulator::KernelStats& stats) {
  py::dict values;
#define NPUSIM_STATISTIC(name, unit, doc) values[#name] = stats.name;
#include "npusim/emulator/statistics.def"
#undef NPUSIM_STATISTIC
  return values;
}

// Intervals as (core, engine, pc, mnemonic, start_ns, end_ns) tuples.
py::list trace_of(const std::vector<emulator::EngineInterval>& trace) {
  py::list intervals;
  for (const emulator::EngineInterval& interval : trace)
    intervals.append(py::make_tuple(interval.core, emulator::kEngineNames[static_cast<int>(interval.engine)],
                                    interval.pc, isa::full_mnemonic(interval.instruction), interval.start_ns,
                                    interval.end_ns));
  return intervals;
}

py::list take_records(int index) {
  std::vector<runtime::CommandRecord> records;
  {
    py::gil_scoped_release released;  // waits for the device's work
    records = device(index).take_records();
  }
  py::list list;
  for (const runtime::CommandRecord& record : records) {
    py::dict entry;
    entry["name"] = record.name;
    entry["scope"] = record.scope;
    entry["op"] = record.op;
    entry["bytes"] = record.bytes;
    entry["start_cycle"] = record.start_cycle;
    entry["stream"] = record.stream;
    entry["cores"] = record.cores;
    entry["kernel_cycles"] = record.kernel_cycles;
    entry["device_cycles"] = record.device_cycles;
    entry["stats"] = statistics_of(record.stats);
    entry["first_hazard"] = record.first_hazard;
    entry["trace"] = trace_of(record.trace);
    list.append(entry);
  }
  return list;
}

// Every parameter of a configuration, keyed "section.key".
py::dict parameters_of(const config::ChipConfig& c) {
  py::dict values;
  values["name"] = c.name;
  values["source"] = c.source;
#define NPUSIM_PARAM(section, key, Type, default_value, unit, min, max, doc) \
  values[#section "." #key] = c.section##_##key;
#include "npusim/config/parameters.def"
#undef NPUSIM_PARAM
  return values;
}

py::dict configuration(const std::string& name_or_path, const std::vector<std::string>& config_dirs) {
  return parameters_of(config::load_config(name_or_path, {config_dirs.begin(), config_dirs.end()}));
}

// The declared parameters (parameters.def) as rows, so Python tools validate values against the same schema.
py::list parameter_schema() {
  py::list rows;
  for (const config::ParamInfo& info : config::parameter_table()) {
    py::dict row;
    row["name"] = std::string(info.section) + "." + std::string(info.key);
    row["type"] = info.type == config::ParamType::Int    ? "integer"
                  : info.type == config::ParamType::Real ? "real"
                                                         : "text";
    row["default"] = std::string(info.default_text);
    row["unit"] = std::string(info.unit);
    row["min"] = info.min;
    row["max"] = info.max;
    row["description"] = std::string(info.doc);
    rows.append(row);
  }
  return rows;
}

py::list presets(const std::vector<std::string>& config_dirs) {
  py::list names;
  for (const std::string& name : config::list_presets({config_dirs.begin(), config_dirs.end()})) names.append(name);
  return names;
}

py::list statistics_declarations() {
  py::list rows;
  for (const emulator::StatisticInfo& info : emulator::kStatistics)
    rows.append(py::make_tuple(std::string(info.name), std::string(info.unit), std::string(info.doc)));
  return rows;
}

py::dict memory_stats(int index) {
  const runtime::MemoryStats stats = device(index).memory_stats();
  py::dict result;
  result["allocated_bytes.all.current"] = stats.allocated_bytes;
  result["allocated_bytes.all.peak"] = stats.peak_allocated_bytes;
  result["reserved_bytes.all.current"] = stats.reserved_bytes;
  result["allocation.all.current"] = stats.allocations;
  result["allocation.all.allocated"] = stats.total_allocations;
  result["free_blocks"] = stats.free_blocks;
  result["largest_free_block_bytes"] = stats.largest_free_block_bytes;
  result["fragmentation"] = stats.fragmentation();
  return result;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "npusim runtime bindings";
  install_keyboard_interrupt_check();
  m.def("init", &init, py::arg("config"), py::arg("mode"), py::arg("config_dirs"));
  m.def("set_default_config_dirs", [](const std::vector<std::string>& dirs) {
    runtime::Session::instance().set_default_config_dirs({dirs.begin(), dirs.end()});
  });
  m.def("device_count", [] { return runtime::Session::instance().device_count(); });
  m.def("is_in_bad_fork", &runtime::Session::in_bad_fork);
  m.def("devices_open", [] { return runtime::Session::instance().devices_open(); });
  m.def("open_devices", [] { runtime::Session::instance().device(0); });
  m.def("current_device", [] {
    return static_cast<int>(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index());
  });
  m.def(
      "set_device",
      [](int index) {
        c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
            ->setDevice(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
      },
      py::arg("device"));
  m.def(
      "synchronize",
      [](int index) {
        runtime::Device& waited = device(index);
        py::gil_scoped_release released;
        waited.synchronize();
      },
      py::arg("device"));
  m.def(
      "default_stream",
      [](int index) {
        return c10::Stream(c10::Stream::DEFAULT,
                           c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
      },
      py::arg("device"));
  m.def(
      "default_generator",
      [](int index) {
        return py::reinterpret_steal<py::object>(
            THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(index))));
      },
      py::arg("device"));
  m.def("properties", &properties, py::arg("device") = 0);
  m.def("take_records", &take_records, py::arg("device") = 0);
  m.def(
      "progress",
      [](int index) {
        const runtime::Device::Progress now = device(index).progress();
        py::dict result;
        result["commands"] = now.commands;
        result["cycles"] = now.cycles;
        return result;
      },
      py::arg("device") = 0);
  m.def("memory_stats", &memory_stats, py::arg("device") = 0);
  m.def(
      "reset_peak_memory_stats", [](int index) { device(index).reset_peak_memory(); }, py::arg("device") = 0);
  m.def(
      "set_tracing", [](bool enabled, int index) { device(index).set_tracing(enabled); }, py::arg("enabled"),
      py::arg("device") = 0);
  m.def(
      "set_recording", [](bool enabled, int index) { device(index).set_recording(enabled); }, py::arg("enabled"),
      py::arg("device") = 0);
  m.def(
      "set_scope", [](const std::string& scope, int index) { device(index).set_scope(scope); }, py::arg("scope"),
      py::arg("device") = 0);
  m.def(
      "set_op", [](const std::string& op, int index) { device(index).set_op(op); }, py::arg("op"),
      py::arg("device") = 0);
  m.def("set_default_recording", [](bool enabled) { runtime::Session::instance().set_default_recording(enabled); });
  m.def("statistics", &statistics_declarations);
  m.def("configuration", &configuration, py::arg("name_or_path"), py::arg("config_dirs"));
  m.def(
      "device_configuration", [](int index) { return parameters_of(device(index).config()); }, py::arg("device") = 0);
  m.def("presets", &presets, py::arg("config_dirs"));
  m.def("parameter_schema", &parameter_schema);
  m.def("fallback_counts", &fallback_counts);
  m.def("reset_fallback_counts", &reset_fallback_counts);
  register_compiled_kernels(m);
  register_operator_names(m);
}

}  // namespace npusim::bridge
