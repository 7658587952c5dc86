// Which operand fields of an instruction address this core's scratchpad or accumulator, and whether the instruction
// reads or writes there: what the kernel builder needs to order engines by the tiles they touch. A test walks every
// row of the ISA table so that a new DMA, vector or matrix instruction cannot be left out.
#pragma once

#include <optional>
#include <vector>

#include "npusim/emitter/kernel_builder.h"
#include "npusim/isa/isa.h"

namespace npusim::emitter {

enum class Field : uint8_t { Rd, Rs1, Rs2, Rs3 };

struct MemoryOperand {
  Field field;
  Space space;
  bool reads;
  bool writes;
};

// The engine whose queue runs the instruction, or none for the scalar unit and the synchronisation instructions.
std::optional<Engine> queue_engine(isa::Opcode opcode);

// The scratchpad and accumulator operands of `instruction` (DRAM operands are not listed). Throws std::logic_error for
// an instruction of a queue engine this table does not know.
std::vector<MemoryOperand> memory_operands(const isa::Instruction& instruction);

}  // namespace npusim::emitter
