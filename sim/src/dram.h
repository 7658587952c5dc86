// DRAM: a TLM-2.0 target in front of the device memory, with independent channels. Addresses interleave across the
// channels in blocks of `dram.interleave_bytes`; each channel moves its share of a transaction, rounded up to whole
// bursts, at bandwidth / channels after the channel's previous transaction (so concurrent initiators contend), and the
// transaction arrives the access latency after its last channel finished.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>

#include <systemc>
#include <tlm>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/device_memory.h"

namespace npusim::sim {

class Dram : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Dram> socket;

  Dram(sc_core::sc_module_name name, const config::ChipConfig& config, emulator::DeviceMemory& memory);

 private:
  void b_transport(int port, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  // Fills share_[c] with the bytes of [address, address + bytes) that channel c holds.
  void split_across_channels(uint64_t address, uint64_t bytes);

  const config::ChipConfig& config_;
  emulator::DeviceMemory& memory_;
  std::vector<sc_core::sc_time> channel_busy_until_;
  std::vector<uint64_t> share_;
};

}  // namespace npusim::sim
