# Every instruction with the encoding the ISA manual's layout gives it, worked out independently of the
# assembler (by a script from the table's opcodes and docs/isa.md's field layout). Assembler.MatchesGoldenEncodings
# assembles each line and compares. Fields: opcode 0-7, rd 8-12, rs1 13-17, rs2 18-22, rs3 23-27, type 28-31, imm 32-63.
add r15, r8, r23                                # encoding: 0x00000000005d0f01
sub r30, r4, r0                                 # encoding: 0x0000000000009e02
mul r30, r16, r14                               # encoding: 0x00000000003a1e03
and r12, r30, r30                               # encoding: 0x00000000007bcc04
or r25, r9, r14                                 # encoding: 0x0000000000393905
xor r9, r24, r0                                 # encoding: 0x0000000000030906
sll r4, r10, r2                                 # encoding: 0x0000000000094407
srl r19, r1, r17                                # encoding: 0x0000000000443308
sra r30, r24, r27                               # encoding: 0x00000000006f1e09
slt r25, r28, r8                                # encoding: 0x000000000023990a
sltu r23, r6, r2                                # encoding: 0x000000000008d70b
div r8, r31, r13                                # encoding: 0x000000000037e80c
divu r16, r27, r19                              # encoding: 0x00000000004f700d
rem r26, r24, r22                               # encoding: 0x00000000005b1a0e
remu r26, r14, r21                              # encoding: 0x000000000055da0f
addi r1, r17, 62                                # encoding: 0x0000003e00022110
andi r18, r7, -70829437                         # encoding: 0xfbc73a830000f211
ori r26, r9, 96                                 # encoding: 0x0000006000013a12
xori r7, r2, 41                                 # encoding: 0x0000002900004713
slli r15, r2, -2116419275                       # encoding: 0x81da013500004f14
srli r12, r26, 474452698                        # encoding: 0x1c4792da00034c15
srai r21, r20, -4                               # encoding: 0xfffffffc00029516
slti r29, r24, 30179941                         # encoding: 0x01cc826500031d17
li r19, 33                                      # encoding: 0x0000002100001318
la r21, 24                                      # encoding: 0x000000030000151a
lhi r20, 62                                     # encoding: 0x0000003e00001419
ld r29, 776(r22)                                # encoding: 0x000003080002dd20
lw r17, -4637(r31)                              # encoding: 0xffffede30003f121
st r3, 1048(r1)                                 # encoding: 0x00000418000c2022
sw r16, -108(r29)                               # encoding: 0xffffff940043a023
beq r20, r11, -216                              # encoding: 0xffffffe5002e8030
bne r20, r23, -96                               # encoding: 0xfffffff4005e8031
blt r24, r6, 176                                # encoding: 0x00000016001b0032
bge r8, r19, 264                                # encoding: 0x00000021004d0033
bltu r17, r15, -216                             # encoding: 0xffffffe5003e2034
bgeu r27, r6, 208                               # encoding: 0x0000001a001b6035
jal r20, 288                                    # encoding: 0x0000002400001436
jalr r14, r28, -1804108138                      # encoding: 0x94777e9600038e37
csrr r28, ncores                                # encoding: 0x0000000100001c40
dma.ld.b8 r7, r2, r12, -950939502               # encoding: 0xc751d09200304750
dma.ld.b16 r22, r8, r26, 18                     # encoding: 0x0000001200691651
dma.ld.b32 r26, r18, r26, -372521263            # encoding: 0xe9cbc6d1006a5a52
dma.ld.b64 r30, r27, r14, 92                    # encoding: 0x0000005c003b7e53
dma.st.b8 r21, r14, r4, -1097218360             # encoding: 0xbe99c6c80011d554
dma.st.b16 r27, r3, r0, -57                     # encoding: 0xffffffc700007b55
dma.st.b32 r15, r1, r26, 481740349              # encoding: 0x1cb6c63d00682f56
dma.st.b64 r16, r30, r3, -1199141221            # encoding: 0xb8868e9b000fd057
dma.ld2.b8 r10, r15, r17, r8, 93                # encoding: 0x0000005d0445ea58
dma.ld2.b16 r15, r17, r27, r3, 1372353882       # encoding: 0x51cc755a01ee2f59
dma.ld2.b32 r2, r7, r3, r4, 2038788906          # encoding: 0x7985732a020ce25a
dma.ld2.b64 r31, r20, r10, r20, 65              # encoding: 0x000000410a2a9f5b
dma.st2.b8 r19, r23, r16, r12, -306232640       # encoding: 0xedbf42c00642f35c
dma.st2.b16 r24, r5, r11, r2, 177483793         # encoding: 0x0a943011012cb85d
dma.st2.b32 r27, r3, r23, r31, 833752833        # encoding: 0x31b20f010fdc7b5e
dma.st2.b64 r15, r13, r17, r4, -1183517088      # encoding: 0xb974f6600245af5f
dma.dim 3, r24, r6                              # encoding: 0x00000003001b004c
dma.ld4.b8 r20, r6, r0, 98                      # encoding: 0x000000620000d444
dma.ld4.b16 r2, r5, r6, -2046606145             # encoding: 0x860344bf0018a245
dma.ld4.b32 r7, r30, r18, 1283109679            # encoding: 0x4c7ab32f004bc746
dma.ld4.b64 r6, r6, r3, -1815320488             # encoding: 0x93cc6858000cc647
dma.st4.b8 r29, r25, r16, -11                   # encoding: 0xfffffff500433d48
dma.st4.b16 r5, r24, r15, 6                     # encoding: 0x00000006003f0549
dma.st4.b32 r9, r25, r9, 91                     # encoding: 0x0000005b0027294a
dma.st4.b64 r28, r11, r8, -63                   # encoding: 0xffffffc100217c4b
dma.c2c r14, r18, r26, r17                      # encoding: 0x0000000008ea4e4d
vadd.f16 r19, r1, r17, r30, 45                  # encoding: 0x0000002d1f443360
vmul.f16 r20, r30, r9, r26, -1263763783         # encoding: 0xb4ac7eb91d27d461
vmax.i8 r4, r25, r2, r29, 1679283441            # encoding: 0x6417d4f13e8b2462
vmin.f16 r16, r15, r12, r16, 1540156227         # encoding: 0x5bcceb431831f063
vsub.i64 r2, r20, r11, r27, -77                 # encoding: 0xffffffb36dae8290
vdiv.i64 r18, r2, r22, r28, -15                 # encoding: 0xfffffff16e585291
vrem.i64 r18, r2, r22, r28, -15                 # encoding: 0xfffffff16e58529d
vand.i64 r24, r31, r4, r13, 39                  # encoding: 0x000000276693f892
vor.i8 r17, r4, r27, r7, -76                    # encoding: 0xffffffb433ec9193
vxor.i32 r28, r18, r16, r6, 83                  # encoding: 0x0000005353425c94
vceq.i32 r11, r9, r11, r23, -1618640770         # encoding: 0x9f85807e5bad2b95
vcne.bf16 r26, r19, r11, r29, -1852864887       # encoding: 0x918f86892eae7a96
vclt.i64 r25, r22, r6, r17, -500880418          # encoding: 0xe2252bde689ad997
vcle.i8 r17, r15, r22, r21, -1850150611         # encoding: 0x91b8f12d3ad9f198
vfma.f16 r3, r4, r5, r6, 1                      # encoding: 0x000000011314839e
vsel.bf16 r17, r6, r7, r7, 45                   # encoding: 0x0000002d239cd199
vfill.i64 r8, r9, 1280740539                    # encoding: 0x4c568cbb6480089a
vmov.bf16 r12, r16, r23                         # encoding: 0x000000002b820c9c
vcvt.u8.f32 r28, r26, r24                       # encoding: 0x000000004c035c9b
vneg.bf16 r19, r31, r19                         # encoding: 0x000000002983f3a0
vabs.i64 r30, r1, r12                           # encoding: 0x0000000066003ea1
vexp.bf16 r0, r6, r14                           # encoding: 0x000000002700c0a2
vlog.f16 r11, r29, r12                          # encoding: 0x000000001603aba3
vtanh.f32 r13, r2, r28                          # encoding: 0x000000000e004da4
vsigmoid.f32 r18, r9, r8                        # encoding: 0x00000000040132a5
verf.f16 r5, r3, r1                             # encoding: 0x00000000108065a6
vrsqrt.f16 r14, r4, r31                         # encoding: 0x000000001f808ea7
vrecip.bf16 r1, r21, r20                        # encoding: 0x000000002a02a1a8
vsqrt.f16 r22, r8, r5                           # encoding: 0x00000000128116a9
vrsum.i64 r2, r5, r21, r13                      # encoding: 0x0000000066d4a2b0
vtr.i64 r2, r5, r21, r13                        # encoding: 0x0000000066d4a2b5
vrmax.f32 r12, r27, r14, r31                    # encoding: 0x000000000fbb6cb1
vrmin.bf16 r6, r2, r26, r4                      # encoding: 0x00000000226846b2
vargmax.i64 r12, r10, r25, r31                  # encoding: 0x000000006fe54cb3
vargmin.i8 r4, r27, r13, r31                    # encoding: 0x000000003fb764b4
vrand.bf16 r3, r7, r21, r9                      # encoding: 0x0000000024d4e3b8
vrandn.f16 r30, r2, r11, r17                    # encoding: 0x0000000018ac5eb9
mx.ldw.bf16 r1, r29, r29                        # encoding: 0x000000002ef42068
mx.ldwt.i8 r28, r11, r29                        # encoding: 0x000000003eaf806b
mx.mac.f32 r16, r23, r23, 52                    # encoding: 0x00000034005ef069
mx.st.f16 r0, r13, r16                          # encoding: 0x000000001041a06a
fence                                           # encoding: 0x0000000000000070
halt                                            # encoding: 0x0000000000000071
barrier                                         # encoding: 0x0000000000000072
sem.post.dma -1308678504                        # encoding: 0xb1ff269800000073
sem.post.vec 363047874                          # encoding: 0x15a3abc200000074
sem.post.mx -1549371460                         # encoding: 0xa3a677bc00000075
sem.wait.dma -41767932                          # encoding: 0xfd82ac0400000076
sem.wait.vec -223239435                         # encoding: 0xf2b1a2f500000077
sem.wait.mx -90                                 # encoding: 0xffffffa600000078
trap -76                                        # encoding: 0xffffffb400000079
wfd                                             # encoding: 0x0000000000000080
launch r30, r12, r10                            # encoding: 0x000000000533c081
wait r21                                        # encoding: 0x0000000000001582
copy.h2d r7, r22, r7                            # encoding: 0x00000000001ec783
copy.d2h r3, r18, r17                           # encoding: 0x0000000000464384
copy.d2d r29, r19, r31                          # encoding: 0x00000000007e7d85
dma.ldx.f16 r3, r9, r12, r20, -6                # encoding: 0xfffffffa1a3123c0
dma.stx.bool r31, r2, r5, r17, 1                # encoding: 0x0000000178945fc1
dma.stxadd.i64 r7, r28, r0, r11, 4096           # encoding: 0x00001000658387c2
vcheck.i32 r14, r6, r25, 1                      # encoding: 0x000000015c99c0ba
vsin.f32 r1, r2, r3                             # encoding: 0x00000000018041aa
vcos.bf16 r31, r30, r29                         # encoding: 0x000000002e83dfab
vlog1p.f16 r4, r5, r6                           # encoding: 0x000000001300a4ac
vexpm1.f32 r7, r8, r9                           # encoding: 0x00000000048107ad
vfloor.bf16 r10, r11, r12                       # encoding: 0x0000000026016aae
vceil.f32 r13, r14, r15                         # encoding: 0x000000000781cdaf
vround.f16 r16, r17, r18                        # encoding: 0x00000000190230bb
vtrunc.f32 r19, r20, r21                        # encoding: 0x000000000a8293bc
