// On-chip network timing: a bandwidth reservation per link, a fixed crossing latency, then the DRAM.
#include "interconnect.h"

#include <algorithm>

namespace npusim::sim {

Interconnect::Interconnect(sc_core::sc_module_name name, const config::ChipConfig& config, int links)
    : sc_module(name),
      socket("socket"),
      dram_port("dram_port"),
      config_(config),
      clock_(config.chip_clock_ghz),
      link_busy_until_(static_cast<size_t>(links), sc_core::SC_ZERO_TIME) {
  socket.register_b_transport(this, &Interconnect::b_transport);
}

void Interconnect::b_transport(int port, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  sc_core::sc_time& link_busy_until = link_busy_until_[link_of_port_.at(port)];
  const sc_core::sc_time start = std::max(now + delay, link_busy_until);
  const double link_cycles =
      static_cast<double>(payload.get_data_length()) / static_cast<double>(config_.interconnect_link_bytes_per_cycle);
  link_busy_until = start + clock_.period * link_cycles;
  const sc_core::sc_time crossing = clock_.cycles(static_cast<uint64_t>(config_.interconnect_latency_cycles));
  sc_core::sc_time dram_delay = start + crossing - now;
  dram_port->b_transport(payload, dram_delay);
  delay = std::max(dram_delay, link_busy_until + crossing - now);
}

}  // namespace npusim::sim
