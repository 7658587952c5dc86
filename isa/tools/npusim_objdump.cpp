// npusim-objdump: print a program image as assembly that npusim-as turns back into the same bytes.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <iostream>

#include "npusim/isa/disassembler.h"
#include "npusim/isa/program_image.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  po::options_description options("usage: npusim-objdump PROGRAM.bin");
  std::string input;
  options.add_options()("help,h", "show this help")("input", po::value(&input)->required(), "program image");
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
    const std::vector<uint64_t> words = npusim::isa::read_image(input);
    std::cout << npusim::isa::disassemble_program(words);
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  return 0;
}
