#9
 ld r2, 8(r1)
 ld r3, 24(r1)
 li r4, 08
 dma.ld.b32 r0, r2, r4, 4
 li r10, 0
 li r10, 65
 li r16, 2
 fence
 mx.ldw.f32 r11, r16, r16
 li r15, 2
 mx.mac.f32 r0, r10, r15, 0
 li r17, 2
 fence
 li r13, 512
 mx.st.f32 r13, r0, r13
 fence
 dma.st.b32 r3, r13, r17, 3
 fence
 halt
