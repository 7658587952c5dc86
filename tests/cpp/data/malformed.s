; a program with a mistake on line 3, column 13
    li r1, 5
    add r1, r7x, r2
    halt
