#1
 li r2, 3
 ld r3, 0(r2)
 halt
