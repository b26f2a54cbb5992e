// The program profile (debug::profile_programs): which runs it times, what it calls each step,
// and the report built from them. Times are only checked for being recorded and adding up, never
// for their size.
#include <numeric>

#include "backend/backend.h"
#include "exec/cut_reason.h"
#include "test_util.h"

namespace lz {
namespace {

class ProgramProfile : public testing::RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    debug::clear_program_profile();
  }
  void TearDown() override {
    debug::profile_programs(false);
    debug::clear_program_profile();
    set_active_backend("cpu");
    RuntimeTest::TearDown();
  }
};

// x[2, 3] @ w[3, 4] + 1, then tanh: one product and one fused kernel on the cpu backend.
std::vector<float> small_step(float shift) {
  Tensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = tensor<float>({1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, shift}, {3, 4});
  return lz::tanh(lz::matmul(x, w) + 1.0f).to_vector<float>();
}

std::vector<debug::ProfileRow> rows_of_kind(const std::string& kind) {
  std::vector<debug::ProfileRow> out;
  for (const debug::ProfileRow& r : debug::program_profile()) {
    if (r.kind == kind) out.push_back(r);
  }
  return out;
}

TEST_F(ProgramProfile, RecordsNothingWhileOff) {
  EXPECT_FALSE(debug::profiling_programs());
  small_step(0);
  EXPECT_TRUE(debug::program_profile().empty());
}

TEST_F(ProgramProfile, TimesEveryRunOfAProgramAndEachOfItsSteps) {
  small_step(0);  // compiled before profiling: its runs are still timed from now on
  debug::profile_programs();
  EXPECT_TRUE(debug::profiling_programs());
  for (float shift : {1.0f, 2.0f, 3.0f}) small_step(shift);  // new data, one program
  std::vector<debug::ProfileRow> rows = debug::program_profile();
  std::vector<debug::ProfileRow> programs = rows_of_kind("program");
  ASSERT_EQ(programs.size(), 1u);
  const debug::ProfileRow& p = programs[0];
  EXPECT_EQ(p.step, -1);
  EXPECT_EQ(p.runs, 3);
  EXPECT_GT(p.total_ns, 0);
  // A value read with no user frame is named after its cut reason.
  EXPECT_EQ(p.label, cut_reason_id(CutReason::ValueRead));

  std::vector<debug::ProfileRow> products = rows_of_kind("matmul");
  ASSERT_EQ(products.size(), 1u);
  EXPECT_EQ(products[0].what, "matmul float32[2, 3] x [3, 4] -> float32[2, 4]");
  // Its kernels name the ops they compute and what they store (the add and the tanh may be one
  // kernel or two: this checks the last).
  std::vector<debug::ProfileRow> kernels = rows_of_kind("kernel");
  ASSERT_FALSE(kernels.empty());
  EXPECT_NE(kernels.back().what.find("tanh -> float32[2, 4]"), std::string::npos)
      << kernels.back().what;
  EXPECT_EQ(kernels.back().what.rfind("kernel lzk_", 0), 0u) << kernels.back().what;
  ASSERT_EQ(rows_of_kind("copies").size(), 1u);
  int64_t in_steps = 0;
  for (const debug::ProfileRow& r : rows) {
    if (r.step < 0) continue;
    EXPECT_EQ(r.program, p.program);
    EXPECT_EQ(r.runs, 3) << r.what;
    in_steps += r.total_ns;
  }
  EXPECT_GT(products[0].total_ns, 0);
  EXPECT_LE(in_steps, p.total_ns);  // steps are timed inside their run
}

TEST_F(ProgramProfile, StopsWhenTurnedOffAndClearForgetsEverything) {
  debug::profile_programs();
  small_step(0);
  debug::profile_programs(false);
  small_step(1);
  ASSERT_EQ(rows_of_kind("program").size(), 1u);
  EXPECT_EQ(rows_of_kind("program")[0].runs, 1);
  debug::clear_program_profile();
  EXPECT_TRUE(debug::program_profile().empty());
}

TEST_F(ProgramProfile, EachProgramHasItsOwnRows) {
  debug::profile_programs();
  small_step(0);
  (tensor<float>({1, 2, 3}, {3}) * 2.0f).to_vector<float>();
  std::vector<debug::ProfileRow> programs = rows_of_kind("program");
  ASSERT_EQ(programs.size(), 2u);
  EXPECT_NE(programs[0].program, programs[1].program);
  EXPECT_EQ(rows_of_kind("matmul").size(), 1u);  // only the first has a product
}

TEST_F(ProgramProfile, ABackendThatNamesNoStepsIsTimedByWholeRuns) {
  set_active_backend("interp");
  debug::profile_programs();
  small_step(0);
  small_step(1);
  std::vector<debug::ProfileRow> rows = debug::program_profile();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].kind, "program");
  EXPECT_EQ(rows[0].runs, 2);
}

TEST_F(ProgramProfile, TheReportNamesProgramsKindsAndTheSlowestSteps) {
  EXPECT_NE(debug::program_profile_report().find("nothing ran while profiling was on"),
            std::string::npos);
  debug::profile_programs();
  small_step(0);
  std::string report = debug::program_profile_report();
  EXPECT_NE(report.find("1 program(s), 1 run(s)"), std::string::npos) << report;
  EXPECT_NE(report.find("by kind:"), std::string::npos) << report;
  EXPECT_NE(report.find("matmul"), std::string::npos) << report;
  EXPECT_NE(report.find(std::string(cut_reason_id(CutReason::ValueRead))), std::string::npos)
      << report;
  EXPECT_NE(report.find("matmul float32[2, 3] x [3, 4] -> float32[2, 4]"), std::string::npos)
      << report;
  // top = 0: the programs, no step list.
  std::string short_report = debug::program_profile_report(0);
  EXPECT_EQ(short_report.find("steps, by time"), std::string::npos) << short_report;
  EXPECT_THROW(debug::program_profile_report(-1), ValueError);
}

}  // namespace
}  // namespace lz
