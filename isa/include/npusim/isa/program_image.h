// The program image format: the encoded instructions (and .dword data) as consecutive 64-bit little-endian words,
// nothing else. Images are position-independent (branches are relative), so the runtime may load them at any
// 8-byte-aligned address.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace npusim::isa {

std::vector<uint64_t> read_image(const std::filesystem::path& path);  // throws std::runtime_error naming the file
void write_image(const std::filesystem::path& path, const std::vector<uint64_t>& words);

}  // namespace npusim::isa
