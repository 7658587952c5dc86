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

// `ns` nanoseconds as SystemC time, rounded to the time resolution as sc_time(ns, SC_NS) rounds, without its
// per-call lookup of the resolution (a cost per DRAM burst).
inline sc_core::sc_time nanoseconds(double ns) {
  static const double ticks_per_ns = static_cast<double>(sc_core::sc_time(1.0, sc_core::SC_NS).value());
  return sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(ns * ticks_per_ns + 0.5));
}

// Time to move `bytes` at `gigabytes_per_second` (10^9 bytes/s, i.e. bytes per ns).
inline sc_core::sc_time transfer_time(uint64_t bytes, double gigabytes_per_second) {
  return nanoseconds(static_cast<double>(bytes) / gigabytes_per_second);
}

}  // namespace npusim::sim
