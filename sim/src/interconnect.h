// The on-chip network between the initiators and the DRAM. Every core reaches it through a link of its own, shared by
// the core's scalar unit and DMA engine (the command processor has one too): a transaction occupies its link for
// bytes / `interconnect.link_bytes_per_cycle` after the link's previous transaction and crosses the network in
// `interconnect.latency_cycles`. Data streams through (cut-through), so a transaction completes when the slower of
// its link and its DRAM channels has moved it.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <systemc>
#include <tlm>
#include <vector>

#include "clock.h"
#include "npusim/config/chip_config.h"

namespace npusim::sim {

class Interconnect : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Interconnect> socket;
  tlm_utils::simple_initiator_socket<Interconnect> dram_port;

  Interconnect(sc_core::sc_module_name name, const config::ChipConfig& config, int links);

  // Binds an initiator's socket to the network through link `link`; several initiators may share a link.
  template <typename InitiatorSocket>
  void attach(InitiatorSocket& initiator, int link) {
    initiator.bind(socket);
    link_of_port_.push_back(link);  // the target socket numbers its ports in binding order
  }

 private:
  void b_transport(int port, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  const config::ChipConfig& config_;
  Clock clock_;
  std::vector<int> link_of_port_;
  std::vector<sc_core::sc_time> link_busy_until_;
};

}  // namespace npusim::sim
