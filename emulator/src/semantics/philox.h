// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a counter-based generator,
// so the numbers at a stream position are a pure function of the key and the position, computed in any order.
#pragma once

#include <array>
#include <cstdint>

namespace npusim::emulator::semantics {

using PhiloxWords = std::array<uint32_t, 4>;

inline PhiloxWords philox4x32_10(PhiloxWords counter, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53, kMultiplier1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;  // the key schedule's increments
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = uint64_t{kMultiplier0} * counter[0], product1 = uint64_t{kMultiplier1} * counter[2];
    counter = {static_cast<uint32_t>(product1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(product1),
               static_cast<uint32_t>(product0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(product0)};
    key = {key[0] + kWeyl0, key[1] + kWeyl1};
  }
  return counter;
}

// The words at stream position `position` under a 64-bit key, as the vrand and vrandn instructions define them.
inline PhiloxWords philox_at(uint64_t key, uint64_t position) {
  return philox4x32_10({static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), 0, 0},
                       {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
}

}  // namespace npusim::emulator::semantics
