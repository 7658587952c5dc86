// npusim-exec: run one program on the simulated chip (functional emulator or SystemC model), through the firmware
// like any kernel, and print what it did.
//   npusim-exec [--config C] [--mode functional|timed] [--buffer BYTES]... [--arg VALUE]... [--show N] PROGRAM
// PROGRAM is assembly (.s) or an image from npusim-as. The argument block (r1) holds each --buffer's device address
// (zero-filled), then each --arg value; --show prints the first N 32-bit words of every buffer afterwards.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>

#include <iostream>

#include "npusim/config/chip_config.h"
#include "npusim/isa/assembler.h"
#include "npusim/isa/program_image.h"
#include "npusim/runtime/device.h"

namespace po = boost::program_options;

namespace {

std::vector<uint64_t> load_program(const std::string& path) {
  return path.ends_with(".s") ? npusim::isa::assemble_file(path) : npusim::isa::read_image(path);
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description options("usage: npusim-exec [options] PROGRAM(.s|.bin)");
  std::string program_path, config_name, mode_name;
  std::vector<uint64_t> buffer_sizes, arguments;
  size_t show = 0;
  options.add_options()("help,h", "show this help")("config,c", po::value(&config_name)->default_value("default"),
                                                    "preset name or YAML path")(
      "mode,m", po::value(&mode_name)->default_value("functional"), "functional or timed")(
      "buffer,b", po::value(&buffer_sizes)->composing(), "allocate a zeroed device buffer of this many bytes")(
      "arg,a", po::value(&arguments)->composing(), "a 64-bit value for the argument block")(
      "show,s", po::value(&show)->default_value(0), "print the first N 32-bit words of each buffer")(
      "program", po::value(&program_path)->required(), "the program");
  po::positional_options_description positional;
  positional.add("program", 1);
  try {
    po::variables_map values;
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(), values);
    if (values.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    po::notify(values);
    const std::vector<uint64_t> words = load_program(program_path);
    const auto config = npusim::config::load_config(config_name, {npusim::config::source_config_dir()});
    npusim::runtime::Device device(config, npusim::runtime::parse_mode(mode_name));
    std::vector<uint64_t> block;
    for (uint64_t bytes : buffer_sizes) {
      block.push_back(device.allocate(bytes));
      const std::vector<char> zeros(bytes, 0);
      device.copy_host_to_device(block.back(), zeros.data(), bytes);
    }
    block.insert(block.end(), arguments.begin(), arguments.end());
    device.take_records();
    device.launch(program_path, device.load_program(words), block);
    const npusim::runtime::CommandRecord record = device.take_records().back();
    fmt::print("{} on {} ({} mode): {} instructions, {} kernel cycles, {} device cycles\n", program_path, config.name,
               mode_name, record.instructions(), record.kernel_cycles, record.device_cycles);
#define NPUSIM_STATISTIC(name, unit, doc) fmt::print("  {:<28} {:>14} {}\n", #name, record.stats.name, unit);
#include "npusim/emulator/statistics.def"
#undef NPUSIM_STATISTIC
    for (size_t index = 0; index < buffer_sizes.size() && show > 0; ++index) {
      std::vector<uint32_t> head(std::min<uint64_t>(show, buffer_sizes[index] / 4));
      device.copy_device_to_host(head.data(), block[index], head.size() * 4);
      fmt::print("buffer {} at 0x{:x}: {}\n", index, block[index], fmt::join(head, " "));
    }
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  return 0;
}
