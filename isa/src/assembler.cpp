// Two-pass assembler: pass one reads every line (following .include) and lays statements out in their sections;
// then labels get addresses (.data follows .text) and .equ constants are evaluated in source order; pass two
// evaluates operands and encodes.
#include "npusim/isa/assembler.h"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "npusim/isa/encoding.h"
#include "npusim/isa/expression.h"
#include "npusim/isa/isa.h"

namespace npusim::isa {

AssemblyError::AssemblyError(SourceLocation where, const std::string& message, std::string_view source_line)
    : std::runtime_error(fmt::format("{}:{}:{}: {}\n{}\n{}^", where.file, where.line, where.column, message,
                                     source_line, std::string(where.column > 0 ? where.column - 1 : 0, ' '))),
      where_(std::move(where)),
      message_(message) {}

namespace {

struct Line {
  SourceLocation where;  // column of the statement's first character
  std::string text;      // the whole source line, for diagnostics
};

// A piece of a line with the column it starts at.
struct Field {
  std::string text;
  int column;
};

enum class Section { Text, Data };

struct Statement {
  const Line* line;
  Field keyword;  // mnemonic or directive
  std::vector<Field> operands;
  Section section;
  uint64_t offset;       // bytes from the start of its section
  uint64_t address = 0;  // bytes from the start of the image, once sections are placed
};

// A label or .equ, defined once every statement has its address.
struct PendingSymbol {
  const Line* line;
  int column;
  std::string name;
  Section section;  // labels: where they point
  uint64_t offset;
  const Field* value = nullptr;  // .equ: the expression
};

// Data directives: element size in bytes; values are packed little-endian and each statement is padded to 8 bytes.
struct DataDirective {
  std::string_view name;
  uint64_t element_bytes;
};
constexpr DataDirective kDataDirectives[] = {{".byte", 1}, {".half", 2}, {".word", 4}, {".dword", 8}, {".float", 4}};
const DataDirective* find_data_directive(std::string_view name) {
  for (const DataDirective& directive : kDataDirectives)
    if (directive.name == name) return &directive;
  return nullptr;
}
uint64_t padded_to_words(uint64_t bytes) {
  return (bytes + kInstructionBytes - 1) / kInstructionBytes * kInstructionBytes;
}

std::string_view trim(std::string_view text, int& column) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
    ++column;
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool is_identifier(std::string_view text) {
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_' || text[0] == '.'))
    return false;
  for (char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

// Splits "a, b(c), d" at top-level commas.
std::vector<Field> split_operands(std::string_view text, int column) {
  std::vector<Field> fields;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '(') ++depth;
    if (i < text.size() && text[i] == ')') --depth;
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      int field_column = column + static_cast<int>(start);
      std::string_view piece = trim(text.substr(start, i - start), field_column);
      fields.push_back({std::string(piece), field_column});
      start = i + 1;
    }
  }
  return fields;
}

class Assembler {
 public:
  explicit Assembler(const AssemblerOptions& options) : options_(options) {}

  std::vector<uint64_t> run(std::string_view source, const std::string& file_name) {
    read_source(source, file_name, 0);
    place_sections();
    std::vector<uint64_t> words;
    for (Section section : {Section::Text, Section::Data})
      for (const Statement& statement : statements_)
        if (statement.section == section) encode_statement(statement, words);
    return words;
  }

 private:
  [[noreturn]] void fail(const Line& line, int column, const std::string& message) const {
    SourceLocation where = line.where;
    where.column = column;
    throw AssemblyError(where, message, line.text);
  }

  void read_source(std::string_view source, const std::string& file_name, int include_depth) {
    std::istringstream stream{std::string(source)};
    std::string text;
    int line_number = 0;
    while (std::getline(stream, text)) {
      ++line_number;
      lines_.push_back(std::make_unique<Line>(Line{{file_name, line_number, 1}, text}));
      read_line(*lines_.back(), include_depth);
    }
  }

  void read_line(const Line& line, int include_depth) {
    std::string_view text = line.text;
    if (size_t comment = text.find_first_of(";#"); comment != std::string_view::npos) text = text.substr(0, comment);
    int column = 1;
    text = trim(text, column);
    // Leading labels: "name:".
    while (true) {
      size_t colon = text.find(':');
      if (colon == std::string_view::npos) break;
      std::string_view name = text.substr(0, colon);
      if (!is_identifier(name)) break;
      symbols_pending_.push_back({&line, column, std::string(name), section_, section_bytes_[index(section_)]});
      column += static_cast<int>(colon + 1);
      text = trim(text.substr(colon + 1), column);
    }
    if (text.empty()) return;
    size_t keyword_end = text.find_first_of(" \t");
    Field keyword{std::string(text.substr(0, keyword_end)), column};
    int operand_column = column + static_cast<int>(keyword_end == std::string_view::npos ? text.size() : keyword_end);
    std::string_view rest = keyword_end == std::string_view::npos ? std::string_view{} : text.substr(keyword_end);
    rest = trim(rest, operand_column);
    std::vector<Field> operands = rest.empty() ? std::vector<Field>{} : split_operands(rest, operand_column);

    if (keyword.text == ".equ") {
      if (operands.size() != 2 || !is_identifier(operands[0].text))
        fail(line, keyword.column, ".equ expects a name and a value: .equ NAME, expression");
      equ_values_.push_back(std::make_unique<Field>(operands[1]));
      symbols_pending_.push_back({&line, operands[0].column, operands[0].text, section_, 0, equ_values_.back().get()});
    } else if (keyword.text == ".include") {
      include(line, keyword, operands, include_depth);
    } else if (keyword.text == ".text" || keyword.text == ".data" || keyword.text == ".section") {
      const std::string name = keyword.text == ".section" && operands.size() == 1 ? operands[0].text : keyword.text;
      if (name != ".text" && name != ".data")
        fail(line, keyword.column, "sections are .text (instructions) and .data (placed after .text)");
      section_ = name == ".text" ? Section::Text : Section::Data;
    } else if (const DataDirective* directive = find_data_directive(keyword.text)) {
      if (operands.empty()) fail(line, keyword.column, fmt::format("{} expects at least one value", keyword.text));
      add_statement(line, keyword, operands, padded_to_words(operands.size() * directive->element_bytes));
    } else if (keyword.text.starts_with('.')) {
      fail(line, keyword.column, fmt::format("unknown directive '{}'", keyword.text));
    } else {
      check_mnemonic(line, keyword);
      if (section_ == Section::Data) fail(line, keyword.column, "instructions belong in .text; this line is in .data");
      add_statement(line, keyword, operands, kInstructionBytes);
    }
  }

  static int index(Section section) { return section == Section::Text ? 0 : 1; }

  void add_statement(const Line& line, const Field& keyword, const std::vector<Field>& operands, uint64_t bytes) {
    statements_.push_back({&line, keyword, operands, section_, section_bytes_[index(section_)]});
    section_bytes_[index(section_)] += bytes;
  }

  // .data goes after .text; labels then have addresses, and .equ values are evaluated in source order.
  void place_sections() {
    const uint64_t base[] = {0, section_bytes_[0]};
    for (Statement& statement : statements_) statement.address = base[index(statement.section)] + statement.offset;
    for (const PendingSymbol& symbol : symbols_pending_)
      if (!symbol.value)
        define(*symbol.line, symbol.column, symbol.name,
               static_cast<int64_t>(base[index(symbol.section)] + symbol.offset));
    for (const PendingSymbol& symbol : symbols_pending_)
      if (symbol.value) define(*symbol.line, symbol.column, symbol.name, evaluate(*symbol.line, *symbol.value));
  }

  // Unknown mnemonics, missing type suffixes and types an instruction does not take, each said plainly.
  void check_mnemonic(const Line& line, const Field& keyword) const {
    const TypedMnemonic found = find_mnemonic(keyword.text);
    if (found.row) {
      const TypeSet allowed = allowed_types(found.row->types);
      const bool conversion = found.row->types == TypeForm::Conversion;
      for (ElementType type : {found.type, conversion ? found.source : found.type})
        if (found.row->typed() && !(allowed & type_bit(type)))
          fail(line, keyword.column,
               fmt::format("'{}' does not take type {}; it takes {}", found.row->mnemonic, type_name(type),
                           type_list(allowed)));
      return;
    }
    for (const InstructionInfo& row : kInstructionTable) {
      if (row.typed() && (keyword.text == row.mnemonic || keyword.text.starts_with(fmt::format("{}.", row.mnemonic))))
        fail(line, keyword.column,
             fmt::format(
                 "'{}' needs {} ({}), as in {}.{}{}", keyword.text,
                 row.types == TypeForm::Conversion ? "destination and source type suffixes" : "an element type suffix",
                 type_list(allowed_types(row.types)), row.mnemonic,
                 type_name(static_cast<ElementType>(std::countr_zero(allowed_types(row.types)))),
                 row.types == TypeForm::Conversion ? ".f32" : ""));
    }
    fail(line, keyword.column, fmt::format("unknown mnemonic '{}'", keyword.text));
  }

  static std::string type_list(TypeSet types) {
    std::string text;
    for (int k = 0; k < kElementTypeCount; ++k)
      if (types >> k & 1) text += fmt::format("{}{}", text.empty() ? "" : " ", kElementTypeNames[k]);
    return text;
  }

  void include(const Line& line, const Field& keyword, const std::vector<Field>& operands, int include_depth) {
    if (operands.size() != 1 || operands[0].text.size() < 2 || operands[0].text.front() != '"' ||
        operands[0].text.back() != '"')
      fail(line, keyword.column, ".include expects a quoted file name");
    if (include_depth > 16) fail(line, keyword.column, ".include nested too deeply (a cycle?)");
    const std::string name = operands[0].text.substr(1, operands[0].text.size() - 2);
    std::vector<std::filesystem::path> candidates{std::filesystem::path(line.where.file).parent_path() / name};
    for (const auto& dir : options_.include_dirs) candidates.push_back(dir / name);
    for (const auto& candidate : candidates) {
      std::ifstream file(candidate);
      if (!file) continue;
      std::stringstream content;
      content << file.rdbuf();
      read_source(content.str(), candidate.string(), include_depth + 1);
      return;
    }
    fail(line, operands[0].column, fmt::format("cannot open include file '{}'", name));
  }

  void define(const Line& line, int column, const std::string& name, int64_t value) {
    if (!symbols_.emplace(name, value).second) fail(line, column, fmt::format("'{}' is already defined", name));
  }

  int64_t evaluate(const Line& line, const Field& field) const {
    try {
      return evaluate_expression(field.text, [&](std::string_view name) -> std::optional<int64_t> {
        auto it = symbols_.find(std::string(name));
        return it == symbols_.end() ? std::nullopt : std::optional<int64_t>(it->second);
      });
    } catch (const ExpressionError& error) {
      fail(line, field.column + error.offset(), error.what());
    }
  }

  uint8_t parse_register(const Line& line, const Field& field) const {
    const std::string& text = field.text;
    if (text == "zero") return 0;
    if (text.size() >= 2 && text[0] == 'r' && text.find_first_not_of("0123456789", 1) == std::string::npos &&
        text.size() <= 3) {
      int number = std::stoi(text.substr(1));
      if (number < kRegisterCount) return static_cast<uint8_t>(number);
    }
    fail(line, field.column, fmt::format("expected a register r0..r{}, found '{}'", kRegisterCount - 1, text));
  }

  int32_t fit_immediate(const Line& line, const Field& field, int64_t value) const {
    if (value < INT32_MIN || value > INT32_MAX)
      fail(line, field.column, fmt::format("value {} does not fit the signed 32-bit immediate", value));
    return static_cast<int32_t>(value);
  }

  void encode_statement(const Statement& statement, std::vector<uint64_t>& words) const {
    const Line& line = *statement.line;
    if (const DataDirective* directive = find_data_directive(statement.keyword.text)) {
      encode_data(line, *directive, statement.operands, words);
      return;
    }
    const TypedMnemonic mnemonic = find_mnemonic(statement.keyword.text);
    const InstructionInfo& row = *mnemonic.row;
    std::vector<char> letters;
    for (char letter : row.operands)
      if (letter != ',') letters.push_back(letter);
    const bool optional_omitted =
        !letters.empty() && letters.back() == 'o' && statement.operands.size() + 1 == letters.size();
    if (optional_omitted) letters.pop_back();
    if (statement.operands.size() != letters.size()) {
      const int column = statement.operands.size() > letters.size() ? statement.operands[letters.size()].column
                                                                    : statement.keyword.column;
      fail(line, column,
           fmt::format("'{}' takes {} operand{} ({}), found {}", row.mnemonic, letters.size(),
                       letters.size() == 1 ? "" : "s", row.operands, statement.operands.size()));
    }
    Instruction instruction{row.opcode};
    if (row.typed()) instruction.type = mnemonic.type;
    if (row.types == TypeForm::Conversion) instruction.imm = static_cast<int32_t>(mnemonic.source);
    for (size_t k = 0; k < letters.size(); ++k) {
      const Field& operand = statement.operands[k];
      switch (letters[k]) {
        case 'd': instruction.rd = parse_register(line, operand); break;
        case 's': instruction.rs1 = parse_register(line, operand); break;
        case 't': instruction.rs2 = parse_register(line, operand); break;
        case 'u': instruction.rs3 = parse_register(line, operand); break;
        case 'i':
        case 'o': instruction.imm = fit_immediate(line, operand, evaluate(line, operand)); break;
        case 'c': {
          auto csr = find_csr(operand.text);
          instruction.imm = csr ? static_cast<int32_t>(*csr) : fit_immediate(line, operand, evaluate(line, operand));
          break;
        }
        case 'b': {
          const int64_t distance = evaluate(line, operand) - static_cast<int64_t>(statement.address);
          if (distance % kInstructionBytes != 0)
            fail(line, operand.column, "branch target is not on an instruction boundary");
          instruction.imm = fit_immediate(line, operand, distance / kInstructionBytes);
          break;
        }
        case 'm': encode_memory_operand(line, operand, instruction); break;
        default: break;
      }
    }
    words.push_back(encode(instruction));
  }

  // Packs the values little-endian, each checked against the element size, and pads the statement to whole words.
  void encode_data(const Line& line, const DataDirective& directive, const std::vector<Field>& operands,
                   std::vector<uint64_t>& words) const {
    std::vector<uint8_t> bytes;
    for (const Field& operand : operands) {
      uint64_t value = 0;
      if (directive.name == ".float") {
        value = std::bit_cast<uint32_t>(parse_float(line, operand));
      } else {
        const int64_t number = evaluate(line, operand);
        const int bits = static_cast<int>(directive.element_bytes * 8);
        if (bits < 64 && (number < -(int64_t{1} << (bits - 1)) || number >= (int64_t{1} << bits)))
          fail(line, operand.column, fmt::format("value {} does not fit {} ({} bits)", number, directive.name, bits));
        value = static_cast<uint64_t>(number);
      }
      for (uint64_t b = 0; b < directive.element_bytes; ++b) bytes.push_back(static_cast<uint8_t>(value >> (8 * b)));
    }
    bytes.resize(padded_to_words(bytes.size()));
    for (size_t offset = 0; offset < bytes.size(); offset += kInstructionBytes) {
      uint64_t word = 0;
      std::memcpy(&word, bytes.data() + offset, kInstructionBytes);
      words.push_back(word);
    }
  }

  float parse_float(const Line& line, const Field& field) const {
    const char* begin = field.text.c_str();
    char* end = nullptr;
    errno = 0;
    const float value = std::strtof(begin, &end);
    if (field.text.empty() || end != begin + field.text.size() || std::isspace(static_cast<unsigned char>(*begin)))
      fail(line, field.column, fmt::format("expected a floating-point number, found '{}'", field.text));
    if (errno == ERANGE && std::isinf(value))
      fail(line, field.column, fmt::format("{} is out of the range of f32", field.text));
    return value;
  }

  // "offset(rN)", offset optional.
  void encode_memory_operand(const Line& line, const Field& operand, Instruction& instruction) const {
    const std::string& text = operand.text;
    const size_t open = text.rfind('(');
    if (text.empty() || text.back() != ')' || open == std::string::npos)
      fail(line, operand.column, fmt::format("expected a memory operand offset(rN), found '{}'", text));
    Field base{text.substr(open + 1, text.size() - open - 2), operand.column + static_cast<int>(open) + 1};
    instruction.rs1 = parse_register(line, base);
    Field offset{text.substr(0, open), operand.column};
    instruction.imm = offset.text.empty() ? 0 : fit_immediate(line, offset, evaluate(line, offset));
  }

  const AssemblerOptions& options_;
  std::vector<std::unique_ptr<Line>> lines_;
  std::vector<Statement> statements_;
  std::vector<PendingSymbol> symbols_pending_;
  std::vector<std::unique_ptr<Field>> equ_values_;
  std::map<std::string, int64_t> symbols_;
  Section section_ = Section::Text;
  uint64_t section_bytes_[2] = {0, 0};
};

}  // namespace

std::vector<uint64_t> assemble(std::string_view source, const std::string& file_name, const AssemblerOptions& options) {
  return Assembler(options).run(source, file_name);
}

std::vector<uint64_t> assemble_file(const std::filesystem::path& path, const AssemblerOptions& options) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error(fmt::format("{}: cannot open file", path.string()));
  std::stringstream content;
  content << file.rdbuf();
  return assemble(content.str(), path.string(), options);
}

}  // namespace npusim::isa
