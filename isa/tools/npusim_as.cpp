// npusim-as: assemble an npusim assembly file into a program image.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <iostream>

#include "npusim/isa/assembler.h"
#include "npusim/isa/program_image.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description options("usage: npusim-as [options] INPUT.s -o OUTPUT.bin");
  std::string input, output;
  std::vector<std::string> include_dirs;
  options.add_options()("help,h", "show this help")("output,o", po::value(&output)->required(),
                                                    "program image to write (64-bit little-endian words)")(
      "include,I", po::value(&include_dirs), "directory searched by .include")("input", po::value(&input)->required(),
                                                                               "assembly source");
  po::positional_options_description positional;
  positional.add("input", 1);
  try {
    po::variables_map values;
    po::store(po::command_line_parser(argc, argv).options(options).positional(positional).run(), values);
    if (values.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    po::notify(values);
    npusim::isa::AssemblerOptions assembler_options;
    for (const auto& dir : include_dirs) assembler_options.include_dirs.emplace_back(dir);
    npusim::isa::write_image(output, npusim::isa::assemble_file(input, assembler_options));
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  return 0;
}
