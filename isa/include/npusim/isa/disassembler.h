// Instruction → assembly text. The output reassembles to the same bytes (tested for every table row).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "npusim/isa/isa.h"

namespace npusim::isa {

// `pc` is the byte address of the instruction; branch targets are printed as absolute addresses.
std::string disassemble(const Instruction& instruction, uint64_t pc = 0);

// A whole program image: branch targets become labels, words that do not decode become .dword directives.
std::string disassemble_program(std::span<const uint64_t> words);

}  // namespace npusim::isa
