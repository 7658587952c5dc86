// The ISA manual (docs/isa.md), written from the instruction table so it cannot drift from the code.
#pragma once

#include <string>

namespace npusim::isa {

std::string render_manual_markdown();

}  // namespace npusim::isa
