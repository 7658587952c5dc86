// Where launches' argument blocks live: a ring in the code region, handed out in submission order. The address of a
// block is a function of the blocks allocated before it alone, never of which launches have finished (a first-fit heap
// reused as the device completes them gave addresses that depended on host thread timing, and with them the DRAM
// channels the cores' argument loads went to, and so the simulated cycles). A block whose space is still held by an
// unfinished launch waits for it rather than going elsewhere.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace npusim::runtime {

class ArgumentRing {
 public:
  ArgumentRing(uint64_t base, uint64_t bytes);

  // The next block's address, or 0 while an unfinished launch still holds part of its space (call again after
  // launches finish: the answer is the same address). Throws OutOfMemory for a block larger than the ring.
  uint64_t allocate(uint64_t bytes);
  // The launch that used the block at `address` finished (in any order).
  void release(uint64_t address);

 private:
  struct Block {
    uint64_t end;  // in ring positions: bytes allocated since the ring was made
    bool released;
  };

  std::mutex mutex_;
  uint64_t base_, size_;
  uint64_t head_ = 0;                 // the next block's position
  std::map<uint64_t, Block> blocks_;  // live blocks by position, oldest first
};

}  // namespace npusim::runtime
