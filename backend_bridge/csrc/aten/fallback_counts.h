// How many times each operator ran through the CPU fallback since the last reset, for reports.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace npusim::bridge {

std::map<std::string, uint64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace npusim::bridge
