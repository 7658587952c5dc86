// The host link (PCIe-like): a TLM-2.0 target whose address space is host memory. Transfers are serialised on the
// link: each takes bytes / bandwidth after the previous one, plus the link latency.
#pragma once

#include <tlm_utils/simple_target_socket.h>

#include <systemc>
#include <tlm>

#include "npusim/config/chip_config.h"

namespace npusim::sim {

class HostLink : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<HostLink> socket;

  HostLink(sc_core::sc_module_name name, const config::ChipConfig& config);

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  const config::ChipConfig& config_;
  sc_core::sc_time busy_until_ = sc_core::SC_ZERO_TIME;
};

}  // namespace npusim::sim
