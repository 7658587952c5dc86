// A small builder for assembly text: instructions, labels, comments, and 64-bit constants that do not fit an
// immediate. Emitters compose kernels from it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace npusim::emitter {

class AssemblyWriter {
 public:
  template <typename... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) {
    text_ += "    " + fmt::format(format, std::forward<Args>(args)...) + "\n";
  }
  void label(const std::string& name) { text_ += name + ":\n"; }
  void comment(const std::string& text) { text_ += "; " + text + "\n"; }
  std::string new_label(const std::string& stem) { return fmt::format("{}_{}", stem, label_count_++); }

  // reg += value, using `scratch` when value does not fit a 32-bit immediate.
  void add_constant(int reg, int64_t value, int scratch);
  // reg = value for any 64-bit value.
  void load_constant(int reg, int64_t value);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int label_count_ = 0;
};

}  // namespace npusim::emitter
