// Reading and writing program images.
#include "npusim/isa/program_image.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace npusim::isa {

std::vector<uint64_t> read_image(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(fmt::format("{}: cannot open file", path.string()));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() % 8 != 0)
    throw std::runtime_error(
        fmt::format("{}: {} bytes is not a whole number of 64-bit words", path.string(), bytes.size()));
  std::vector<uint64_t> words(bytes.size() / 8);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

void write_image(const std::filesystem::path& path, const std::vector<uint64_t>& words) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * 8));
  if (!file) throw std::runtime_error(fmt::format("{}: cannot write", path.string()));
}

}  // namespace npusim::isa
