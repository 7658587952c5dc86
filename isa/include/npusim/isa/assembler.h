// npusim assembly → program image (a flat sequence of 64-bit little-endian words, loaded at any 8-byte-aligned
// address: branches and `la` are relative, so images are position-independent). docs/assembly.md has the details.
//
// Syntax, one statement per line:   [label:] [mnemonic operands | directive]   [; comment | # comment]
//   registers r0..r31 (r0 reads zero, alias `zero`); immediates are expressions over integers (decimal, 0x, 0b),
//   labels and .equ constants with + - * / % << >> & | ^ ~ and parentheses. Typed mnemonics carry their element
//   type as a suffix (vadd.bf16, vcvt.f16.f32). A label's value is its byte offset in the image.
//   directives: .equ NAME, expr    .include "file"    .text    .data    .section .text|.data
//               .byte/.half/.word/.dword expr[, ...]  (1/2/4/8-byte values)    .float literal[, ...]  (f32)
//   Sections: instructions go in .text; .data is placed after all of .text. Each data statement is padded with
//   zeros to a whole 64-bit word, so every label is 8-byte aligned.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace npusim::isa {

struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

// what() is "file:line:col: message" followed by the source line and a caret under the column.
class AssemblyError : public std::runtime_error {
 public:
  AssemblyError(SourceLocation where, const std::string& message, std::string_view source_line);
  const SourceLocation& where() const { return where_; }
  const std::string& message() const { return message_; }

 private:
  SourceLocation where_;
  std::string message_;
};

struct AssemblerOptions {
  std::vector<std::filesystem::path> include_dirs;
};

std::vector<uint64_t> assemble(std::string_view source, const std::string& file_name,
                               const AssemblerOptions& options = {});
std::vector<uint64_t> assemble_file(const std::filesystem::path& path, const AssemblerOptions& options = {});

}  // namespace npusim::isa
