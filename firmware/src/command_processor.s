; Command-processor firmware. Each stream has a command ring; the host appends 64-byte commands to the rings and
; rings the doorbell. The firmware visits the rings in turn and executes the command at the head of each, in order
; within a ring. A ring whose head command waits for an event that has not been recorded yet is skipped, so the
; other streams go on and commands complete out of order across streams. Every completed command gets an entry in
; the completion queue (sequence, status, start and end cycle). The host also counts the commands it has written
; into all the rings: once as many have completed, or when a whole pass over the rings finds nothing to run (all
; that remains waits for events), the firmware sleeps until the next doorbell. Every access to the rings and the
; queue is a DRAM access, so the firmware reads as few words as it can.
;
; registers: r10 ring header, r11 head, r12 tail, r13 slot address - RING_SLOTS, r14 command kind,
;            r5..r7 arguments, r8 status, r16 ring index, r17 whether this pass ran a command,
;            r18 start cycle, r20 completion queue, r21 commands completed since boot, r9 r15 r19 r22 scratch
.include "ring_abi.inc"

boot:
    li   r20, COMPLETION_BASE
    li   r21, 0
sleep:
    wfd                                 ; nothing can run until the host rings the doorbell
pass:
    ld   r15, COMPLETION_SUBMITTED(r20)
    beq  r15, r21, sleep                ; every command written has completed
    li   r17, 0
    li   r16, 0
visit_ring:
    slli r10, r16, RING_SHIFT
    li   r15, RING_BASE
    add  r10, r10, r15
    ld   r11, RING_HEAD(r10)
    ld   r12, RING_TAIL(r10)
    beq  r11, r12, next_ring            ; ring empty
    csrr r18, cycle                     ; the command's start: reading it from the ring is part of its cost
    andi r13, r11, RING_CAPACITY - 1
    slli r13, r13, SLOT_SHIFT
    add  r13, r13, r10
    ld   r14, RING_SLOTS + SLOT_KIND(r13)
    ld   r5, RING_SLOTS + SLOT_ARG0(r13)
    ld   r6, RING_SLOTS + SLOT_ARG1(r13)
    ld   r7, RING_SLOTS + SLOT_ARG2(r13)
    li   r8, 0
    li   r15, COMMAND_LAUNCH
    beq  r14, r15, launch
    li   r15, COMMAND_COPY_H2D
    beq  r14, r15, copy_h2d
    li   r15, COMMAND_COPY_D2H
    beq  r14, r15, copy_d2h
    li   r15, COMMAND_COPY_D2D
    beq  r14, r15, copy_d2d
    li   r15, COMMAND_EVENT_RECORD
    beq  r14, r15, event_record
    li   r15, COMMAND_EVENT_WAIT
    beq  r14, r15, event_wait
    li   r15, COMMAND_FENCE
    beq  r14, r15, complete             ; commands run one at a time, so everything taken before has completed
    li   r8, STATUS_UNKNOWN_COMMAND
    jal  r0, complete

launch:
    launch r5, r6, r7
    wait r8                             ; 0, or 1 + the first core that trapped
    jal  r0, complete
copy_h2d:
    copy.h2d r5, r6, r7
    jal  r0, complete
copy_d2h:
    copy.d2h r5, r6, r7
    jal  r0, complete
copy_d2d:
    copy.d2d r5, r6, r7
    jal  r0, complete
; An event command's address must lie in the event table: a corrupt one would otherwise write over the rings or the
; firmware itself (four cycles, on event commands only; a misaligned address inside the table traps at the access).
bad_event:
    li   r8, STATUS_BAD_EVENT
    jal  r0, complete
event_record:
    li   r15, EVENT_BASE
    sub  r9, r5, r15
    li   r15, EVENT_COUNT << EVENT_SHIFT
    bgeu r9, r15, bad_event
    csrr r9, cycle
    st   r9, EVENT_CYCLE(r5)
    st   r6, EVENT_VALUE(r5)
    jal  r0, complete
event_wait:
    li   r15, EVENT_BASE
    sub  r9, r5, r15
    li   r15, EVENT_COUNT << EVENT_SHIFT
    bgeu r9, r15, bad_event
    ld   r9, EVENT_VALUE(r5)
    bltu r9, r6, next_ring              ; not recorded yet: this ring waits, the others go on

complete:
    csrr r19, cycle
    andi r22, r21, COMPLETION_CAPACITY - 1
    slli r22, r22, COMPLETION_SHIFT
    add  r22, r22, r20
    ld   r9, RING_SLOTS + SLOT_SEQUENCE(r13)
    st   r9, COMPLETION_ENTRIES + ENTRY_SEQUENCE(r22)
    st   r8, COMPLETION_ENTRIES + ENTRY_STATUS(r22)
    st   r18, COMPLETION_ENTRIES + ENTRY_START_CYCLE(r22)
    st   r19, COMPLETION_ENTRIES + ENTRY_END_CYCLE(r22)
    addi r21, r21, 1
    st   r21, COMPLETION_TAIL(r20)
    addi r11, r11, 1
    st   r11, RING_HEAD(r10)
    li   r17, 1
    ld   r15, COMPLETION_SUBMITTED(r20)
    beq  r15, r21, sleep                ; that was the last command written: no need to look at the other rings
next_ring:
    addi r16, r16, 1
    li   r15, RING_COUNT
    bltu r16, r15, visit_ring
    bne  r17, r0, pass                  ; something ran: another pass, it may have unblocked a waiting ring
    jal  r0, sleep
