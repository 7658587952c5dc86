#3
 ld r2, 8(r1)
 ld r3, 24(r1)
 li r4, 64
 dma.ld.b32 r0, r2, r4, 4
 fence
 li r5, 256
 vadd.f32 r5, r0, r0, r4, 0
 vexp.f32 r5, r5, r4
 fence
 dma.st.b32 r3, r5, r4, 4
 fence
 halt
