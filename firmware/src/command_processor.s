; Command-processor firmware. The host appends 64-byte commands to the ring and rings the doorbell; this loop
; consumes them in order, executes each, and publishes its sequence number and status in the ring header.
;
; registers: r10 ring base, r11 head, r12 tail, r13 slot address, r14 command kind, r5..r7 arguments, r8 status
.include "ring_abi.inc"

boot:
    li   r10, RING_BASE
sleep:
    wfd                                 ; nothing to do until the host rings the doorbell
next:
    ld   r11, RING_HEAD(r10)
    ld   r12, RING_TAIL(r10)
    beq  r11, r12, sleep                ; ring empty
    andi r13, r11, RING_CAPACITY - 1
    slli r13, r13, SLOT_SHIFT
    add  r13, r13, r10                  ; r13 = slot address - RING_SLOTS
    ld   r14, RING_SLOTS + SLOT_KIND(r13)
    ld   r5, RING_SLOTS + SLOT_ARG0(r13)
    ld   r6, RING_SLOTS + SLOT_ARG1(r13)
    ld   r7, RING_SLOTS + SLOT_ARG2(r13)
    li   r15, COMMAND_LAUNCH
    beq  r14, r15, launch
    li   r15, COMMAND_COPY_H2D
    beq  r14, r15, copy_h2d
    li   r15, COMMAND_COPY_D2H
    beq  r14, r15, copy_d2h
    li   r15, COMMAND_COPY_D2D
    beq  r14, r15, copy_d2d
    li   r8, STATUS_UNKNOWN_COMMAND
    jal  r0, complete

launch:
    launch r5, r6, r7
    wait r8                             ; 0, or 1 + the first core that trapped
    jal  r0, complete
copy_h2d:
    copy.h2d r5, r6, r7
    li   r8, 0
    jal  r0, complete
copy_d2h:
    copy.d2h r5, r6, r7
    li   r8, 0
    jal  r0, complete
copy_d2d:
    copy.d2d r5, r6, r7
    li   r8, 0

complete:
    st   r8, RING_STATUS(r10)
    ld   r9, RING_SLOTS + SLOT_SEQUENCE(r13)
    st   r9, RING_COMPLETED(r10)
    addi r11, r11, 1
    st   r11, RING_HEAD(r10)
    jal  r0, next
