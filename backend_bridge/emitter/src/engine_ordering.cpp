// The engine-ordering tracker (engine_ordering.h explains the rules).
#include "engine_ordering.h"

#include <algorithm>

namespace npusim::emitter {
namespace {

uint8_t bit(Engine engine) { return static_cast<uint8_t>(1u << static_cast<int>(engine)); }
constexpr uint8_t kAllEngines = (1u << kQueueEngines) - 1;

}  // namespace

std::vector<EngineOrdering::Sync> EngineOrdering::conflicts(int tile, Engine engine, bool write) const {
  std::vector<Sync> syncs;
  const auto pending = state_.find(tile);
  if (pending == state_.end()) return syncs;
  for (const Access& earlier : pending->second) {
    if (earlier.engine == engine || (earlier.ordered_after & bit(engine)) || !(write || earlier.write)) continue;
    const bool known = std::any_of(syncs.begin(), syncs.end(), [&](const Sync& s) { return s.from == earlier.engine; });
    if (!known) syncs.push_back({earlier.engine, engine});
  }
  return syncs;
}

void EngineOrdering::apply(const Sync& sync) {
  for (auto& [tile, accesses] : state_) {
    Retired& retired = retired_[tile];
    for (Access& access : accesses) {
      if (access.engine == sync.from || (access.ordered_after & bit(sync.from))) access.ordered_after |= bit(sync.to);
      if (access.ordered_after != kAllEngines) continue;
      retired.any = std::max(retired.any, access.serial);
      if (access.write) retired.write = std::max(retired.write, access.serial);
    }
    std::erase_if(accesses, [](const Access& access) { return access.ordered_after == kAllEngines; });
  }
  std::erase_if(state_, [](const auto& entry) { return entry.second.empty(); });
}

void EngineOrdering::fence() {
  state_.clear();
  last_fence_ = static_cast<int64_t>(log_.size());
}

std::vector<EngineOrdering::Sync> EngineOrdering::access(int tile, Engine engine, bool write, size_t instruction) {
  std::vector<Sync> syncs = conflicts(tile, engine, write);
  for (const Sync& sync : syncs) apply(sync);
  std::vector<Access>& accesses = state_[tile];
  const Retired& retired = retired_[tile];
  int64_t covered_since = std::max(last_fence_, write ? retired.write : retired.any);
  for (const Access& earlier : accesses)
    if ((earlier.ordered_after & bit(engine)) && (earlier.write || !write))
      covered_since = std::max(covered_since, earlier.serial);
  const auto serial = static_cast<int64_t>(log_.size());
  log_.push_back({tile, engine, write, covered_since, instruction});
  // After its syncs a write follows every access still pending, so it alone need be remembered: whatever is ordered
  // after it is ordered after them.
  if (write) accesses.clear();
  accesses.push_back({engine, write, bit(engine), serial});
  return syncs;
}

void EngineOrdering::join(const std::vector<State>& incoming, bool falls_through) {
  std::vector<const State*> states;
  if (falls_through) states.push_back(&state_);
  for (const State& state : incoming) states.push_back(&state);
  State joined;
  for (const State* state : states)
    for (const auto& [tile, accesses] : *state)
      for (const Access& access : accesses) {
        std::vector<Access>& into = joined[tile];
        auto same = std::find_if(into.begin(), into.end(),
                                 [&](const Access& a) { return a.engine == access.engine && a.write == access.write; });
        if (same == into.end())
          into.push_back(access);
        else {
          same->ordered_after &= access.ordered_after;
          same->serial = std::min(same->serial, access.serial);  // the older covers fewer loops
        }
      }
  // An access on some paths only is as unordered as it can be on those: the intersection above is over the paths
  // that have it; the paths without it impose nothing.
  state_ = std::move(joined);
}

std::vector<EngineOrdering::Placement> EngineOrdering::loop_back(size_t position) const {
  std::vector<Placement> placements;
  for (size_t k = position; k < log_.size(); ++k) {
    if (log_[k].covered_since >= static_cast<int64_t>(position)) continue;
    for (const Sync& sync : conflicts(log_[k].tile, log_[k].engine, log_[k].write)) {
      auto same = std::find_if(placements.begin(), placements.end(),
                               [&](const Placement& p) { return p.sync.from == sync.from && p.sync.to == sync.to; });
      if (same == placements.end())
        placements.push_back({sync, log_[k].instruction});
      else
        same->instruction = std::min(same->instruction, log_[k].instruction);
    }
  }
  return placements;
}

void EngineOrdering::shift(size_t instruction, size_t count) {
  for (Logged& logged : log_)
    if (logged.instruction >= instruction) logged.instruction += count;
}

}  // namespace npusim::emitter
