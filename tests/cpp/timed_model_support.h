// What the timed-model tests share: the chip they run on and a way to find a kernel's record.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/runtime/device.h"

namespace npusim {

// parameters.def's defaults (1 GHz, 100 GB/s and 100 ns DRAM, 16 lanes, 128 B/cycle core links), with room for the
// tests' buffers, one DRAM channel and no network latency: the closed-form timings in the tests are derived from
// these figures (the tests of channels and the network set their own).
inline config::ChipConfig test_config() {
  config::ChipConfig config;
  config.dram_capacity_mib = 256;
  config.dram_channels = 1;
  config.interconnect_latency_cycles = 0;
  return config;
}

// A vector's elements as the bytes of a device buffer (of std::byte, or of uint8_t where a test does arithmetic on
// them), and back.
template <typename Byte = std::byte, typename T>
std::vector<Byte> bytes_of(const std::vector<T>& values) {
  std::vector<Byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}
template <typename T, typename Byte>
std::vector<T> values_of(const std::vector<Byte>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

// The record of a kernel (run_program's by default) among the copies around it.
inline runtime::CommandRecord kernel_record(const std::vector<runtime::CommandRecord>& records,
                                            const std::string& name = "program") {
  for (const runtime::CommandRecord& record : records)
    if (record.name == name) return record;
  ADD_FAILURE() << "no kernel record named " << name;
  return {};
}

}  // namespace npusim
