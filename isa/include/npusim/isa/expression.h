// Integer expressions in assembly operands: literals, symbols, C operators with C precedence, parentheses.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace npusim::isa {

class ExpressionError : public std::runtime_error {
 public:
  ExpressionError(int offset, const std::string& message) : std::runtime_error(message), offset_(offset) {}
  int offset() const { return offset_; }  // position within the expression text

 private:
  int offset_;
};

using SymbolLookup = std::function<std::optional<int64_t>(std::string_view name)>;

int64_t evaluate_expression(std::string_view text, const SymbolLookup& lookup);

}  // namespace npusim::isa
