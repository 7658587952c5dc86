// Writes ring_abi.inc: the firmware's view (.equ lines) of the ABI defined in ring_abi.h.
#include <fstream>
#include <iostream>

#include "npusim/firmware/ring_abi.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write-ring-abi OUTPUT.inc\n";
    return 1;
  }
  std::ofstream out(argv[1]);
  out << "; generated from firmware/include/npusim/firmware/ring_abi.h; do not edit\n";
#define NPUSIM_WRITE_EQU(name, value) out << ".equ " #name ", " << static_cast<uint64_t>(value) << "\n";
  NPUSIM_RING_ABI(NPUSIM_WRITE_EQU)
#undef NPUSIM_WRITE_EQU
  return out ? 0 : 1;
}
