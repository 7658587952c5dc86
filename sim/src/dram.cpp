// DRAM timing: per-channel bandwidth reservation plus fixed latency.
#include "dram.h"

#include <algorithm>

#include "clock.h"

namespace npusim::sim {

Dram::Dram(sc_core::sc_module_name name, const config::ChipConfig& config, emulator::DeviceMemory& memory)
    : sc_module(name),
      socket("socket"),
      config_(config),
      memory_(memory),
      channel_busy_until_(static_cast<size_t>(config.dram_channels), sc_core::SC_ZERO_TIME),
      share_(static_cast<size_t>(config.dram_channels), 0) {
  socket.register_b_transport(this, &Dram::b_transport);
}

// In closed form rather than block by block: a 64 KiB transfer is 256 interleave blocks but only a few channels.
void Dram::split_across_channels(uint64_t address, uint64_t bytes) {
  const auto interleave = static_cast<uint64_t>(config_.dram_interleave_bytes);
  const uint64_t channels = share_.size();
  std::fill(share_.begin(), share_.end(), 0);
  uint64_t block = address / interleave;
  const uint64_t head = std::min(bytes, interleave - address % interleave);  // up to the first block boundary
  share_[block % channels] += head;
  bytes -= head;
  ++block;
  const uint64_t whole_blocks = bytes / interleave;
  const uint64_t rounds = whole_blocks / channels;  // every channel gets one block per round
  if (rounds > 0)
    for (uint64_t& share : share_) share += rounds * interleave;
  block += rounds * channels;
  for (uint64_t i = 0; i < whole_blocks % channels; ++i, ++block) share_[block % channels] += interleave;
  share_[block % channels] += bytes % interleave;  // the tail
}

void Dram::b_transport(int, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  const uint64_t bytes = payload.get_data_length();
  // Data moves first: an out-of-range access raises a Trap to the initiating engine, like a bus error.
  if (payload.is_read())
    memory_.read(payload.get_address(), payload.get_data_ptr(), bytes);
  else
    memory_.write(payload.get_address(), payload.get_data_ptr(), bytes);
  split_across_channels(payload.get_address(), bytes);
  const auto burst = static_cast<uint64_t>(config_.dram_burst_bytes);
  const double channel_bandwidth = config_.dram_bandwidth_gbps / static_cast<double>(share_.size());
  const sc_core::sc_time arrival = sc_core::sc_time_stamp() + delay;
  sc_core::sc_time finished = arrival;
  for (size_t channel = 0; channel < share_.size(); ++channel) {
    if (share_[channel] == 0) continue;
    const uint64_t occupied_bytes = (share_[channel] + burst - 1) / burst * burst;
    sc_core::sc_time& busy_until = channel_busy_until_[channel];
    busy_until = std::max(arrival, busy_until) + transfer_time(occupied_bytes, channel_bandwidth);
    finished = std::max(finished, busy_until);
  }
  delay = finished + nanoseconds(config_.dram_latency_ns) - sc_core::sc_time_stamp();
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace npusim::sim
