// A fused kernel's spec (fused.h) as the emitter reads it: the opcodes' classes, the checks of a spec, and which
// values are per-row.
#pragma once

#include <string_view>
#include <vector>

#include "npusim/emitter/fused.h"

namespace npusim::emitter::fused {

std::string_view op_name(FusedOpcode op);  // "Exp"
bool is_unary(FusedOpcode op);             // Neg .. Convert
bool is_arithmetic(FusedOpcode op);        // Add .. Xor
bool is_compare(FusedOpcode op);           // Eq .. Ge
bool is_reduction(FusedOpcode op);         // ReduceSum .. ReduceArgMin
bool is_random(FusedOpcode op);            // RandomUniform, RandomNormal
// Whether node `node` is a value the scalar core reads itself (a random number's key and first position): a
// constant, an argument, or a load with strides 0.
bool read_by_the_scalar_core(const FusedSpec& spec, int node);
int operand_count(FusedOpcode op);  // of a, b, c
// The type a vector move (vmov) of `type`'s elements takes: f64, which only vcvt takes, moves as i64 (the same bytes).
isa::ElementType moved_type(isa::ElementType type);

// Throws std::invalid_argument for the first problem of the spec, naming the kernel and the node.
void validate(const FusedSpec& spec);

// Whether node i is per-row, given the flags of the nodes before it (its operands and its load access checked).
bool node_per_row(const FusedSpec& spec, size_t i, const std::vector<char>& per_row);
// Every node's, of a valid spec.
std::vector<char> per_row_flags(const FusedSpec& spec);

}  // namespace npusim::emitter::fused
