// Blocking TLM-2.0 reads and writes from an initiator socket, with the transaction's delay threaded through.
#pragma once

#include <cstdint>

#include <systemc>
#include <tlm>
#include "npusim/emulator/trap.h"

namespace npusim::sim {

template <typename Socket>
void transport(Socket& socket, tlm::tlm_command command, uint64_t address, void* data, uint64_t bytes,
               sc_core::sc_time& delay) {
  // TLM lengths are 32-bit; callers move larger amounts in chunks.
  if (bytes > UINT32_MAX) throw emulator::Trap("a single memory transaction of more than 4 GiB");
  // One payload reused: constructing one allocates its extension array, a cost per DRAM burst. Targets complete a
  // transaction without yielding, so no two transactions of this thread are ever in flight together.
  static thread_local tlm::tlm_generic_payload payload;
  payload.set_command(command);
  payload.set_address(address);
  payload.set_data_ptr(static_cast<unsigned char*>(data));
  payload.set_data_length(static_cast<unsigned int>(bytes));
  payload.set_streaming_width(static_cast<unsigned int>(bytes));
  payload.set_byte_enable_ptr(nullptr);
  payload.set_dmi_allowed(false);
  payload.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  socket->b_transport(payload, delay);
}

}  // namespace npusim::sim
