// Conversions between cycles, bytes and SystemC time for one configured chip.
#pragma once

#include <cmath>
#include <cstdint>
#include <systemc>

namespace npusim::sim {

struct Clock {
  sc_core::sc_time period;

  explicit Clock(double frequency_ghz) : period(1.0 / frequency_ghz, sc_core::SC_NS) {}
  sc_core::sc_time cycles(uint64_t count) const { return period * static_cast<double>(count); }
  uint64_t to_cycles(const sc_core::sc_time& time) const {
    return static_cast<uint64_t>(std::ceil(time / period - 1e-9));
  }
};

// Time to move `bytes` at `gigabytes_per_second` (10^9 bytes/s, i.e. bytes per ns).
inline sc_core::sc_time transfer_time(uint64_t bytes, double gigabytes_per_second) {
  return sc_core::sc_time(static_cast<double>(bytes) / gigabytes_per_second, sc_core::SC_NS);
}

}  // namespace npusim::sim
