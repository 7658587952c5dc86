#3
 ld r2, 16(r1)
 li r4, 8
 dma.ld.b64 r0, r2, r4, 8
 fence
 li r5, 1
 li r6, 64
 csrr r7, coreid
 xori r7, r7, 1
 dma.c2c r6, r0, r7, r4
 fence
 barrier
 halt
