// Loading and unloading a program 10,000 times, and creating and destroying
// executions, keeps memory flat.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "fcb/fcb.h"
#include "test_util.h"

namespace fcb {
namespace {

// Resident set size in bytes, from /proc/self/statm.
uint64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

TEST(Soak, LoadUnloadAndExecutionsKeepMemoryFlat) {
  testing::TempDir tmp;
  CompileSpec spec;
  spec.targets = {"all"};
  spec.input_shapes["input"] = {1, 3, 64, 64};
  ASSERT_TRUE(Compile(FCB_SOURCE_DIR "/models/demo_cnn.onnx", spec, tmp.File("m.fcb")).ok());
  std::vector<float> in(3 * 64 * 64, 0.5f);
  auto cycle = [&](int i) {
    auto program = Program::Load(tmp.File("m.fcb"));
    ASSERT_TRUE(program.ok()) << program.status().message();
    auto ex = Execution::Create(program.value(), "main", 1 + i % 2);
    ASSERT_TRUE(ex.ok());
    if (i % 50 == 0) {  // run now and then: arenas and pools are really used
      ASSERT_TRUE(ex.value()->SetInput("input", in.data(), in.size() * 4).ok());
      ASSERT_TRUE(ex.value()->Run().ok());
    }
  };
  for (int i = 0; i < 500; ++i) cycle(i);  // warm up allocator caches
  const uint64_t before = RssBytes();
  for (int i = 0; i < 10000; ++i) {
    cycle(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const uint64_t after = RssBytes();
  const double growth_mib = (static_cast<double>(after) - static_cast<double>(before)) / (1 << 20);
  std::printf("RSS before %.1f MiB, after 10,000 load/unload cycles %.1f MiB (growth %.2f MiB)\n",
              before / 1048576.0, after / 1048576.0, growth_mib);
  // Bound: 2 MiB. A leak of one prepared method (~tens of KB) or one arena
  // (~300 KB) per cycle would grow RSS by hundreds of MiB over 10,000 cycles.
  EXPECT_LT(growth_mib, 2.0);
}

}  // namespace
}  // namespace fcb
