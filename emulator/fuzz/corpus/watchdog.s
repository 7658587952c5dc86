#2
spin: jal r0, spin
