// npusim-objdump: print a program image as assembly that npusim-as turns back into the same bytes.
#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>

#include "npusim/isa/disassembler.h"

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
    std::ifstream file(input, std::ios::binary);
    if (!file) throw std::runtime_error(fmt::format("{}: cannot open file", input));
    std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (bytes.size() % 8 != 0)
      throw std::runtime_error(fmt::format("{}: {} bytes is not a whole number of 64-bit words", input, bytes.size()));
    std::vector<uint64_t> words(bytes.size() / 8);
    std::memcpy(words.data(), bytes.data(), bytes.size());
    std::cout << npusim::isa::disassemble_program(words);
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
  return 0;
}
