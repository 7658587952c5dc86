#3
 csrr r2, coreid
 beq r2, r0, first
 barrier
 halt
first: halt
