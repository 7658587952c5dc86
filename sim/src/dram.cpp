// DRAM timing: bandwidth reservation plus fixed latency.
#include "dram.h"

#include "clock.h"

namespace npusim::sim {

Dram::Dram(sc_core::sc_module_name name, const config::ChipConfig& config, emulator::DeviceMemory& memory)
    : sc_module(name), socket("socket"), config_(config), memory_(memory) {
  socket.register_b_transport(this, &Dram::b_transport);
}

void Dram::b_transport(int, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  const uint64_t bytes = payload.get_data_length();
  // Data moves first: an out-of-range access raises a Trap to the initiating engine, like a bus error.
  if (payload.is_read())
    memory_.read(payload.get_address(), payload.get_data_ptr(), bytes);
  else
    memory_.write(payload.get_address(), payload.get_data_ptr(), bytes);
  const auto burst = static_cast<uint64_t>(config_.dram_burst_bytes);
  const uint64_t occupied_bytes = (bytes + burst - 1) / burst * burst;
  const sc_core::sc_time arrival = sc_core::sc_time_stamp() + delay;
  const sc_core::sc_time start = std::max(arrival, busy_until_);
  busy_until_ = start + transfer_time(occupied_bytes, config_.dram_bandwidth_gbps);
  delay = busy_until_ + nanoseconds(config_.dram_latency_ns) - sc_core::sc_time_stamp();
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace npusim::sim
