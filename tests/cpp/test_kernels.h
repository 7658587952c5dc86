// Small kernels the runtime and firmware tests launch.
#pragma once

namespace npusim::test_kernels {

// *arguments[0] += arguments[1], after spinning arguments[2] times (a long kernel, when the count is large).
inline constexpr const char* kAddAfterSpin = R"(
    ld   r2, 0(r1)
    ld   r3, 8(r1)
    ld   r4, 16(r1)
spin:
    beq  r4, r0, done
    addi r4, r4, -1
    jal  r0, spin
done:
    ld   r5, 0(r2)
    add  r5, r5, r3
    st   r5, 0(r2)
    halt
)";

}  // namespace npusim::test_kernels
