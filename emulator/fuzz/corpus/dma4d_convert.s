#1
 ld r2, 0(r1)
 li r3, 4
 li r4, 2
 dma.dim 1, r3, r4
 li r5, 8
 dma.ld4.b16 r0, r2, r5, 2
 fence
 li r6, 128
 vcvt.f32.f16 r6, r0, r5
 vrsum.f32 r6, r6, r3, r4
 trap 7
