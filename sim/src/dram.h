// DRAM: a TLM-2.0 target in front of the device memory. Each transaction is rounded up to whole bursts and occupies
// the memory for bytes / bandwidth after the previous one (so concurrent initiators contend), then arrives after the
// access latency.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>

#include <systemc>
#include <tlm>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/device_memory.h"

namespace npusim::sim {

class Dram : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Dram> socket;

  Dram(sc_core::sc_module_name name, const config::ChipConfig& config, emulator::DeviceMemory& memory);

 private:
  void b_transport(int port, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  const config::ChipConfig& config_;
  emulator::DeviceMemory& memory_;
  sc_core::sc_time busy_until_ = sc_core::SC_ZERO_TIME;
};

}  // namespace npusim::sim
