// Derives the order the DMA, vector and matrix engines must keep from the tiles each instruction reads and writes.
//
// The engines run their queues concurrently, so an instruction of engine E that touches a tile another engine F has
// a pending conflicting access to (either of them writing) must wait for F. The tracker keeps, per tile, the accesses
// that may still be in flight and which engines are known to be ordered after each. When an access conflicts, it
// asks for a sync "E waits for everything F was given so far" (the builder emits sem.post on F and sem.wait on E);
// a sync orders every earlier access of F, on every tile, before E's later instructions.
//
// Control flow: at a forward branch the state is saved for its target, where states merge (an access is pending if
// it is on any path; an engine is ordered after it only if it is on every path). At a backward branch (a loop's back
// edge) the body logged since its target was bound must be able to run again. Its accesses that the body itself
// orders after an earlier access of the same tile in the body (a write, or for a read any access, or a fence) are
// safe whatever the state at the branch; the others, the body's exposed accesses, each conflict they have with the
// state there gets a sync placed just before the exposed access, inside the body: the next iteration waits where it
// needs to, not at the back edge (so a matrix engine can start the next block's products while the DMA engine stores
// this block's results). Such a sync orders the previous iteration only, so it changes nothing in the state.
// What orders an access must be on every path to it: after a join, an earlier access, fence or retirement that only
// some paths have covers nothing (a store in a block that a branch skips does not make a later store safe). A sync
// F -> E that every path in the body passes before an access of E covers that access's conflicts with F at the back
// edge too, since it waits for everything F was given, the previous iteration's work included.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {

class EngineOrdering {
 public:
  struct Sync {
    Engine from, to;  // `to` waits until `from` has finished everything queued before
  };
  struct Access {
    Engine engine;
    bool write;
    uint8_t ordered_after;  // engines whose later instructions are known to follow this access
    int64_t serial;         // its position in the log; after a join, the oldest of the paths', or -1 when some path
                            // lacks it (it then covers nothing)
  };
  // Per tile, the latest serials of accesses that every engine is ordered after (they leave the pending ones).
  struct Retired {
    int64_t write = -1, any = -1;
  };
  using BySource = std::array<int64_t, kQueueEngines>;  // a log position per engine synced from
  struct State {
    std::map<int, std::vector<Access>> pending;  // per tile id
    std::map<int, Retired> retired;              // per tile id
    int64_t last_fence = -1;                     // the log position of the latest fence
    // The log position of the latest sync from -> to, per engine `to` waiting: synced[to][from].
    std::array<BySource, kQueueEngines> synced = {BySource{-1, -1, -1}, BySource{-1, -1, -1}, BySource{-1, -1, -1}};
  };

  // Records an access by `engine` to `tile` made by the instruction that will stand at `instruction` in the program;
  // returns the syncs to emit before it (already applied).
  std::vector<Sync> access(int tile, Engine engine, bool write, size_t instruction);
  // A fence: every engine has finished.
  void fence();

  const State& state() const { return state_; }
  // The state after a label that `incoming` states branch to; `falls_through` when the code before it reaches it.
  void join(const std::vector<State>& incoming, bool falls_through);

  size_t log_position() const { return log_.size(); }
  struct Placement {
    Sync sync;
    size_t instruction;  // the sync goes before the instruction at this index
  };
  // The syncs a branch back to the code logged since `position` needs: one per engine pair at its earliest place,
  // and one more before a later access that code can reach without passing that place (a label bound between them,
  // at an instruction index in `labels`: a conditional block's sync does not cover what follows it).
  std::vector<Placement> loop_back(size_t position, const std::vector<int64_t>& labels) const;
  // Instructions were inserted at `instruction`: the logged ones from there on move by `count`.
  void shift(size_t instruction, size_t count);

 private:
  struct Logged {
    int tile;
    Engine engine;
    bool write;
    int64_t covered_since;  // the latest serial of an access (or fence) this one is ordered after, as above; or -1
    BySource synced_from;   // per engine F: the log position of the latest sync F -> this engine before it, or -1
    size_t instruction;
  };
  std::vector<Sync> conflicts(int tile, Engine engine, bool write) const;
  void apply(const Sync& sync);

  State state_;
  std::vector<Logged> log_;
};

}  // namespace npusim::emitter
