// The timed chip: the SystemC/TLM-2.0 model of the NPU. It runs the same programs through the emulator's semantics
// and adds time. SystemC elaborates one design per process, so a process can create one timed chip.
#pragma once

#include <memory>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/chip.h"

namespace npusim::sim {

// Throws std::logic_error if this process already built one (SystemC cannot elaborate a second design).
std::unique_ptr<emulator::Chip> make_timed_chip(const config::ChipConfig& config);

}  // namespace npusim::sim
