// Host link: the address of a transaction is a host pointer handed over by the runtime in a copy command.
#include "host_link.h"

#include <cstring>

#include "clock.h"

namespace npusim::sim {

HostLink::HostLink(sc_core::sc_module_name name, const config::ChipConfig& config)
    : sc_module(name), socket("socket"), config_(config) {
  socket.register_b_transport(this, &HostLink::b_transport);
}

void HostLink::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  auto* host = reinterpret_cast<unsigned char*>(payload.get_address());
  if (payload.is_read())
    std::memcpy(payload.get_data_ptr(), host, payload.get_data_length());
  else
    std::memcpy(host, payload.get_data_ptr(), payload.get_data_length());
  const sc_core::sc_time start = std::max(sc_core::sc_time_stamp() + delay, busy_until_);
  busy_until_ = start + transfer_time(payload.get_data_length(), config_.host_link_bandwidth_gbps);
  delay = busy_until_ + nanoseconds(config_.host_link_latency_ns) - sc_core::sc_time_stamp();
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace npusim::sim
