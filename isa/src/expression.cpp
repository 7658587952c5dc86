// Recursive-descent evaluator; one function per precedence level, lowest first.
#include "npusim/isa/expression.h"

#include <fmt/format.h>

#include <cctype>
#include <string>

namespace npusim::isa {
namespace {

// Expressions compute in 64-bit two's complement: overflow wraps, as the hardware's registers do.
int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }

class Parser {
 public:
  Parser(std::string_view text, const SymbolLookup& lookup) : text_(text), lookup_(lookup) {}

  int64_t parse() {
    skip_space();
    if (at_end()) throw ExpressionError(0, "expected an expression");
    int64_t value = parse_or();
    skip_space();
    if (!at_end()) throw ExpressionError(pos_, fmt::format("unexpected '{}' in expression", text_[pos_]));
    return value;
  }

 private:
  bool at_end() const { return pos_ >= static_cast<int>(text_.size()); }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(std::string_view token) {
    skip_space();
    if (text_.substr(pos_).starts_with(token)) {
      pos_ += static_cast<int>(token.size());
      return true;
    }
    return false;
  }

  int64_t parse_or() {
    int64_t value = parse_xor();
    while (accept("|")) value |= parse_xor();
    return value;
  }
  int64_t parse_xor() {
    int64_t value = parse_and();
    while (accept("^")) value ^= parse_and();
    return value;
  }
  int64_t parse_and() {
    int64_t value = parse_shift();
    while (accept("&")) value &= parse_shift();
    return value;
  }
  int64_t parse_shift() {
    int64_t value = parse_sum();
    while (true) {
      if (accept("<<"))
        value = static_cast<int64_t>(static_cast<uint64_t>(value) << (parse_sum() & 63));
      else if (accept(">>"))
        value >>= (parse_sum() & 63);
      else
        return value;
    }
  }
  int64_t parse_sum() {
    int64_t value = parse_product();
    while (true) {
      if (accept("+"))
        value = wrap(static_cast<uint64_t>(value) + static_cast<uint64_t>(parse_product()));
      else if (accept("-"))
        value = wrap(static_cast<uint64_t>(value) - static_cast<uint64_t>(parse_product()));
      else
        return value;
    }
  }
  int64_t parse_product() {
    int64_t value = parse_unary();
    while (true) {
      if (accept("*")) {
        value = wrap(static_cast<uint64_t>(value) * static_cast<uint64_t>(parse_unary()));
      } else if (accept("/") || accept("%")) {
        const bool divide = text_[pos_ - 1] == '/';
        const int divisor_pos = pos_;
        const int64_t divisor = parse_unary();
        if (divisor == 0) throw ExpressionError(divisor_pos, "division by zero in expression");
        if (divisor == -1 && value == INT64_MIN) throw ExpressionError(divisor_pos, "division overflows 64 bits");
        value = divide ? value / divisor : value % divisor;
      } else {
        return value;
      }
    }
  }
  int64_t parse_unary() {
    if (accept("-")) return wrap(0 - static_cast<uint64_t>(parse_unary()));
    if (accept("+")) return parse_unary();
    if (accept("~")) return ~parse_unary();
    return parse_primary();
  }
  int64_t parse_primary() {
    skip_space();
    if (at_end()) throw ExpressionError(pos_, "expression ends where a value was expected");
    const int start = pos_;
    if (accept("(")) {
      int64_t value = parse_or();
      if (!accept(")")) throw ExpressionError(pos_, "missing ')'");
      return value;
    }
    const char first = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(first))) return parse_number(start);
    if (std::isalpha(static_cast<unsigned char>(first)) || first == '_' || first == '.') {
      while (!at_end() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' || text_[pos_] == '.'))
        ++pos_;
      const std::string_view name = text_.substr(start, pos_ - start);
      if (auto value = lookup_(name)) return *value;
      throw ExpressionError(start, fmt::format("undefined symbol '{}'", name));
    }
    throw ExpressionError(start, fmt::format("unexpected '{}' in expression", first));
  }
  int64_t parse_number(int start) {
    int base = 10;
    if (text_.substr(pos_).starts_with("0x") || text_.substr(pos_).starts_with("0X"))
      base = 16, pos_ += 2;
    else if (text_.substr(pos_).starts_with("0b") || text_.substr(pos_).starts_with("0B"))
      base = 2, pos_ += 2;
    const int digits_start = pos_;
    while (!at_end() && std::isalnum(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    const std::string digits(text_.substr(digits_start, pos_ - digits_start));
    size_t used = 0;
    uint64_t value = 0;
    try {
      value = std::stoull(digits, &used, base);
    } catch (const std::exception&) {
      used = 0;
    }
    if (digits.empty() || used != digits.size())
      throw ExpressionError(start, fmt::format("malformed number '{}'", text_.substr(start, pos_ - start)));
    return static_cast<int64_t>(value);
  }

  std::string_view text_;
  const SymbolLookup& lookup_;
  int pos_ = 0;
};

}  // namespace

int64_t evaluate_expression(std::string_view text, const SymbolLookup& lookup) { return Parser(text, lookup).parse(); }

}  // namespace npusim::isa
