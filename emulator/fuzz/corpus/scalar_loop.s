#1
 li r2, 10
 li r3, 0
loop: add r3, r3, r2
 addi r2, r2, -1
 bne r2, r0, loop
 ld r4, 24(r1)
 st r3, 0(r4)
 halt
