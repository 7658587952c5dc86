#1
 ld r2, 0(r1)
 li r4, 32
 dma.ld.b8 r0, r2, r4, 1
 sem.post.dma 1
 sem.wait.dma 1
 vfill.i32 r4, r4, 7
 sem.wait.vec 2
 halt
