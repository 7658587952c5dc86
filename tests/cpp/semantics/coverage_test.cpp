// The table walker: every row of the instruction table has a semantics suite named after it.
#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

// Every row of the table has a suite above named after it.
TEST(InstructionTable, EveryInstructionHasASemanticsTest) {
  std::set<std::string> suites;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int k = 0; k < unit.total_test_suite_count(); ++k) suites.insert(unit.GetTestSuite(k)->name());
  for (const isa::InstructionInfo& row : isa::kInstructionTable)
    EXPECT_TRUE(suites.contains(std::string(row.name)))
        << row.name << " (" << row.mnemonic << ") has no semantics test";
}

}  // namespace npusim::emulator::semantics_test
