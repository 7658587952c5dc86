; writes 0, 1, ..., n-1 as 32-bit words: argument 0 is the buffer, argument 1 is n
    ld   r2, 0(r1)
    ld   r3, 8(r1)
    li   r4, 0
loop:
    sw   r4, 0(r2)
    addi r2, r2, 4
    addi r4, r4, 1
    bne  r4, r3, loop
    halt
