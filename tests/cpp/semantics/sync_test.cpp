// Synchronisation (fence, halt, trap, semaphores, barriers) and the command processor's instructions, the latter
// through the firmware on a two-core device.
#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

// ---- synchronisation
TEST_F(Fence, IsANoOpForTheEmulator) { EXPECT_EQ(r3("li r3, 4\n fence"), 4u); }
TEST_F(Halt, EndsTheKernel) { EXPECT_EQ(r3("li r3, 4\n halt\n li r3, 5"), 4u); }
TEST_F(RaiseTrap, StopsWithItsCode) {
  const auto fault = run("li r3, 1\n trap 42\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->cause, "trap instruction, code 42");
  EXPECT_EQ(fault->pc, kProgram + 8);
  EXPECT_EQ(fault->instruction, "trap 42");
}
TEST_F(SemPostDma, LetsALaterWaitProceed) { EXPECT_EQ(r3("sem.post.dma 3\n sem.wait.mx 3\n li r3, 1"), 1u); }
TEST_F(SemPostVector, CountsPosts) {
  EXPECT_EQ(r3("sem.post.vec 0\n sem.post.vec 0\n sem.wait.dma 0\n sem.wait.dma 0\n li r3, 2"), 2u);
}
TEST_F(SemPostMatrix, RejectsSemaphoresThatDoNotExist) {
  EXPECT_EQ(trap_of("sem.post.mx 16\n halt\n"), "semaphore 16 does not exist (0..15)");
}
TEST_F(SemWaitDma, WithoutAnEarlierPostIsADeadlock) {
  EXPECT_EQ(trap_of("sem.wait.dma 1\n sem.post.mx 1\n halt\n"),
            "deadlock: this wait on semaphore 1 can never complete: it needs post number 1 and no earlier instruction "
            "posts it");
}
TEST_F(SemWaitVector, EachWaitConsumesOnePost) {
  EXPECT_NE(trap_of("sem.post.dma 2\n sem.wait.vec 2\n sem.wait.vec 2\n halt\n").find("post number 2"),
            std::string::npos);
}
TEST_F(SemWaitMatrix, SemaphoresStartAtZeroInEveryKernel) {
  EXPECT_FALSE(run("sem.post.dma 5\n halt\n"));
  EXPECT_NE(trap_of("sem.wait.mx 5\n halt\n").find("deadlock"), std::string::npos);
}

// ---- barrier and the command processor's instructions, through the firmware on a two-core device
std::unique_ptr<runtime::Device> two_core_device() {
  return std::make_unique<runtime::Device>(Semantics::config(), runtime::Mode::Functional);
}

TEST_F(Barrier, OrdersCoreToCoreMovesBetweenCores) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  // Each core sends its id + 100 to the other core's scratchpad, meets it at the barrier, then stores what it got.
  // (Each core stages its message in its own word of `out`: the cores run on parallel host threads, so a word both
  // stored to would hold either core's.)
  const auto program = isa::assemble(
      "csrr r2, coreid\n addi r3, r2, 100\n li r4, 8\n li r5, 0\n li r6, 0\n ld r7, 0(r1)\n"
      " addi r8, r2, 0\n xori r9, r2, 1\n li r10, 64\n li r11, 16\n"
      " li r12, 128\n slli r13, r2, 3\n add r13, r13, r7\n st r3, 0(r13)\n fence\n"
      " dma.ld.b8 r12, r13, r4, 1\n fence\n dma.c2c r10, r12, r9, r4\n barrier\n"
      " slli r14, r2, 3\n add r14, r14, r7\n addi r14, r14, 16\n dma.st.b8 r14, r10, r4, 1\n fence\n halt\n",
      "barrier.s");
  const uint64_t out = device.allocate(64);
  const uint64_t arguments[] = {out};
  device.launch("exchange", device.load_program(program), arguments, 0b11);
  uint64_t received[2] = {};
  device.copy_device_to_host(received, out + 16, 16);
  EXPECT_EQ(received[0], 101u);  // core 0 got core 1's message
  EXPECT_EQ(received[1], 100u);
}
TEST_F(Barrier, ThatACoreNeverReachesIsADeadlockNamingIt) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble("csrr r2, coreid\n beq r2, r0, skip\n barrier\nskip: halt\n", "deadlock.s");
  const uint64_t arguments[] = {0};
  try {
    device.launch("half_barrier", device.load_program(program), arguments, 0b11);
    device.synchronize();
    ADD_FAILURE() << "no error";
  } catch (const runtime::DeviceError& error) {
    EXPECT_NE(std::string(error.what()).find("core 1, pc"), std::string::npos) << error.what();
    EXPECT_NE(
        std::string(error.what()).find("(barrier): deadlock: this barrier can never complete: core 0 halted instead"),
        std::string::npos)
        << error.what();
  }
  // The device stays usable.
  const auto fine = isa::assemble("barrier\n halt\n", "fine.s");
  device.launch("full_barrier", device.load_program(fine), arguments, 0b11);
  // A launch of one core meets itself at the barrier.
  device.launch("lonely_barrier", device.load_program(fine), arguments, 0b01);
  EXPECT_NO_THROW(device.synchronize());
}
TEST_F(Launch, StartsTheCoresOfTheMaskWithTheirArguments) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble(
      "ld r2, 0(r1)\n csrr r3, coreid\n slli r4, r3, 3\n add r2, r2, r4\n"
      " addi r3, r3, 7\n st r3, 0(r2)\n halt\n",
      "launch.s");
  const uint64_t out = device.allocate(16);
  const uint64_t zero[2] = {};
  device.copy_host_to_device(out, zero, 16);
  const uint64_t arguments[] = {out};
  device.launch("ids", device.load_program(program), arguments, 0b10);
  uint64_t written[2] = {};
  device.copy_device_to_host(written, out, 16);
  EXPECT_EQ(written[0], 0u);  // core 0 was not in the mask
  EXPECT_EQ(written[1], 8u);
}
TEST_F(Wait, ReportsTheFaultingCore) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble("csrr r2, coreid\n beq r2, r0, fine\n trap 7\nfine: halt\n", "wait.s");
  const uint64_t arguments[] = {0};
  try {
    device.launch("one_traps", device.load_program(program), arguments, 0b11);
    device.synchronize();
    ADD_FAILURE() << "no error";
  } catch (const runtime::DeviceError& error) {
    EXPECT_NE(std::string(error.what()).find("core 1, pc"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("trap instruction, code 7"), std::string::npos) << error.what();
  }
}
TEST_F(Wfd, FirmwareSleepsUntilEachCommand) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble("halt\n", "empty.s");
  const uint64_t arguments[] = {0};
  for (int k = 0; k < 3; ++k) device.launch("empty", device.load_program(program), arguments, 1);
  EXPECT_EQ(device.take_records().size(), 3u);
}
TEST_F(CopyH2D, CopiesUnalignedSizes) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  std::vector<uint8_t> data(1001), back(1001);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 13);
  const uint64_t buffer = device.allocate(2048);
  device.copy_host_to_device(buffer + 3, data.data(), data.size());
  device.copy_device_to_host(back.data(), buffer + 3, back.size());
  EXPECT_EQ(back, data);
}
TEST_F(CopyD2H, CopiesUnalignedSizes) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const uint64_t buffer = device.allocate(64);
  const char text[] = "npusim";
  device.copy_host_to_device(buffer, text, sizeof text);
  char back[sizeof text] = {};
  device.copy_device_to_host(back, buffer + 2, sizeof text - 2);
  EXPECT_STREQ(back, "usim");
}
TEST_F(CopyD2D, CopiesWithinTheDevice) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const uint64_t a = device.allocate(64), b = device.allocate(64);
  const uint64_t value = 0xfeedull;
  device.copy_host_to_device(a, &value, 8);
  device.copy_device_to_device(b + 8, a, 8);
  uint64_t back = 0;
  device.copy_device_to_host(&back, b + 8, 8);
  EXPECT_EQ(back, value);
}

}  // namespace npusim::emulator::semantics_test
