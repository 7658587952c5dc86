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
  const auto pending = state_.pending.find(tile);
  if (pending == state_.pending.end()) return syncs;
  for (const Access& earlier : pending->second) {
    if (earlier.engine == engine || (earlier.ordered_after & bit(engine)) || !(write || earlier.write)) continue;
    const bool known = std::any_of(syncs.begin(), syncs.end(), [&](const Sync& s) { return s.from == earlier.engine; });
    if (!known) syncs.push_back({earlier.engine, engine});
  }
  return syncs;
}

void EngineOrdering::apply(const Sync& sync) {
  for (auto& [tile, accesses] : state_.pending) {
    Retired& retired = state_.retired[tile];
    for (Access& access : accesses) {
      if (access.engine == sync.from || (access.ordered_after & bit(sync.from))) access.ordered_after |= bit(sync.to);
      if (access.ordered_after != kAllEngines) continue;
      retired.any = std::max(retired.any, access.serial);
      if (access.write) retired.write = std::max(retired.write, access.serial);
    }
    std::erase_if(accesses, [](const Access& access) { return access.ordered_after == kAllEngines; });
  }
  std::erase_if(state_.pending, [](const auto& entry) { return entry.second.empty(); });
}

void EngineOrdering::fence() {
  state_.pending.clear();
  state_.last_fence = static_cast<int64_t>(log_.size());
  for (BySource& from : state_.synced) from.fill(state_.last_fence);
}

std::vector<EngineOrdering::Sync> EngineOrdering::access(int tile, Engine engine, bool write, size_t instruction) {
  std::vector<Sync> syncs = conflicts(tile, engine, write);
  for (const Sync& sync : syncs) {
    apply(sync);
    state_.synced[static_cast<int>(sync.to)][static_cast<int>(sync.from)] = static_cast<int64_t>(log_.size());
  }
  std::vector<Access>& accesses = state_.pending[tile];
  const Retired& retired = state_.retired[tile];
  int64_t covered_since = std::max(state_.last_fence, write ? retired.write : retired.any);
  for (const Access& earlier : accesses)
    if ((earlier.ordered_after & bit(engine)) && (earlier.write || !write))
      covered_since = std::max(covered_since, earlier.serial);
  const auto serial = static_cast<int64_t>(log_.size());
  log_.push_back({tile, engine, write, covered_since, state_.synced[static_cast<int>(engine)], instruction});
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
  joined.last_fence = states.empty() ? -1 : states.front()->last_fence;
  if (!states.empty()) joined.synced = states.front()->synced;
  for (const State* state : states) {
    joined.last_fence = std::min(joined.last_fence, state->last_fence);
    for (int to = 0; to < kQueueEngines; ++to)
      for (int from = 0; from < kQueueEngines; ++from)
        joined.synced[to][from] = std::min(joined.synced[to][from], state->synced[to][from]);
  }
  // A tile's retirements: the oldest of the paths', none where a path has none.
  for (const auto& [tile, retired] : states.empty() ? std::map<int, Retired>{} : states.front()->retired) {
    Retired oldest = retired;
    for (const State* state : states) {
      const auto other = state->retired.find(tile);
      const Retired theirs = other == state->retired.end() ? Retired{} : other->second;
      oldest.write = std::min(oldest.write, theirs.write);
      oldest.any = std::min(oldest.any, theirs.any);
    }
    joined.retired[tile] = oldest;
  }
  for (const State* state : states)
    for (const auto& [tile, accesses] : state->pending)
      for (const Access& access : accesses) {
        std::vector<Access>& into = joined.pending[tile];
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
  // that have it; the paths without it impose nothing on ordering, but it covers nothing either.
  for (auto& [tile, accesses] : joined.pending)
    for (Access& access : accesses) {
      const bool on_every_path = std::all_of(states.begin(), states.end(), [&](const State* state) {
        const auto theirs = state->pending.find(tile);
        return theirs != state->pending.end() &&
               std::any_of(theirs->second.begin(), theirs->second.end(),
                           [&](const Access& a) { return a.engine == access.engine && a.write == access.write; });
      });
      if (!on_every_path) access.serial = -1;
    }
  state_ = std::move(joined);
}

std::vector<EngineOrdering::Placement> EngineOrdering::loop_back(size_t position,
                                                                 const std::vector<int64_t>& labels) const {
  // Whether every path to `instruction` passes `placed` (before it, with no label between to enter by).
  const auto passes = [&](size_t placed, size_t instruction) {
    return placed <= instruction && std::none_of(labels.begin(), labels.end(), [&](int64_t label) {
             return label > static_cast<int64_t>(placed) && label <= static_cast<int64_t>(instruction);
           });
  };
  std::vector<Placement> placements;
  for (size_t k = position; k < log_.size(); ++k) {
    if (log_[k].covered_since >= static_cast<int64_t>(position)) continue;
    for (const Sync& sync : conflicts(log_[k].tile, log_[k].engine, log_[k].write)) {
      const bool synced_in_body = log_[k].synced_from[static_cast<int>(sync.from)] >= static_cast<int64_t>(position);
      const bool covered =
          synced_in_body || std::any_of(placements.begin(), placements.end(), [&](const Placement& p) {
            return p.sync.from == sync.from && p.sync.to == sync.to && passes(p.instruction, log_[k].instruction);
          });
      if (!covered) placements.push_back({sync, log_[k].instruction});
    }
  }
  return placements;
}

void EngineOrdering::shift(size_t instruction, size_t count) {
  for (Logged& logged : log_)
    if (logged.instruction >= instruction) logged.instruction += count;
}

}  // namespace npusim::emitter
