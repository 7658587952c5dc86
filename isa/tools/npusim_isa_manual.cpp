// Writes the ISA manual generated from the instruction table (the build puts it at build/docs/isa.md).
#include <fstream>
#include <iostream>

#include "npusim/isa/manual.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: npusim-isa-manual OUTPUT.md\n";
    return 1;
  }
  std::ofstream(argv[1]) << npusim::isa::render_manual_markdown();
  return 0;
}
