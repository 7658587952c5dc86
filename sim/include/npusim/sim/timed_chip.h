// The timed chip: the SystemC/TLM-2.0 model of the NPU. It runs the same programs through the emulator's semantics
// and adds time. SystemC elaborates one design per process, so a process builds its timed chips once, all together:
// they share one simulated clock, and every call into them must come from one host thread.
#pragma once

#include <memory>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/chip.h"

namespace npusim::sim {

// `count` chips of one configuration in one design. Throws std::logic_error if this process already built its timed
// chips (SystemC cannot elaborate a second design).
std::vector<std::unique_ptr<emulator::Chip>> make_timed_chips(const config::ChipConfig& config, int count);

}  // namespace npusim::sim
