// Per-kernel statistics (declared in statistics.def) and the engine activity a timed run can trace.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "npusim/isa/isa.h"

namespace npusim::emulator {

struct KernelStats {
#define NPUSIM_STATISTIC(name, unit, doc) uint64_t name = 0;
#include "npusim/emulator/statistics.def"
#undef NPUSIM_STATISTIC

  void add(const KernelStats& other) {
#define NPUSIM_STATISTIC(name, unit, doc) name += other.name;
#include "npusim/emulator/statistics.def"
#undef NPUSIM_STATISTIC
  }
  // Counts one retired instruction against the engine that runs it.
  void count_instruction(isa::TimingClass timing) {
    switch (timing) {
      case isa::TimingClass::Dma: ++instructions_dma; break;
      case isa::TimingClass::Vector:
      case isa::TimingClass::VectorSpecial: ++instructions_vector; break;
      case isa::TimingClass::Matrix: ++instructions_matrix; break;
      default: ++instructions_scalar; break;
    }
  }
};

struct StatisticInfo {
  std::string_view name, unit, doc;
};
inline constexpr std::array kStatistics = {
#define NPUSIM_STATISTIC(name, unit, doc) StatisticInfo{#name, unit, doc},
#include "npusim/emulator/statistics.def"
#undef NPUSIM_STATISTIC
};

enum class Engine : uint8_t { Scalar, Dma, Vector, Matrix };
inline constexpr std::array<std::string_view, 4> kEngineNames = {"scalar", "dma", "vector", "matrix"};

// One stretch of engine activity in a timed run: a tile instruction, or a whole kernel on the scalar track.
struct EngineInterval {
  int core = 0;
  Engine engine = Engine::Scalar;
  uint64_t pc = 0;
  isa::Instruction instruction{};  // for its mnemonic; halt on the scalar track
  double start_ns = 0, end_ns = 0;
};

}  // namespace npusim::emulator
