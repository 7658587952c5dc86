#3
 csrr r2, coreid
 ld r3, 24(r1)
 slli r4, r2, 3
 add r3, r3, r4
 st r2, 0(r3)
 barrier
 ld r5, 0(r3)
 barrier
 halt
