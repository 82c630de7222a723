// One loaded Program serves several methods on several threads at once: each
// thread owns its Execution (arena, thread pool) and runs its method many
// times; every output must equal, bit for bit, the output of a run made
// alone beforehand. scripts/tsan.sh runs this test under ThreadSanitizer.
//
// The program holds three methods: the tiny transformer's prefill and decode
// (GEMM, batched MatMul, Gather, Softmax, Where, ...) and the demo CNN
// (convolutions, pooling), so the kernels of both families run concurrently
// over the one mapping of the shared weight pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "fcb/npy.h"
#include "fcb/fcb.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

struct Job {
  std::string method;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> inputs;
  int threads = 1;                           // per execution
  std::vector<std::vector<uint8_t>> expected;  // per output, from a run made alone
};

Result<std::vector<std::vector<uint8_t>>> RunOnce(const std::shared_ptr<const Program>& p, const Job& job) {
  FCB_ASSIGN_OR_RETURN(auto ex, Execution::Create(p, job.method, job.threads));
  for (const auto& [name, bytes] : job.inputs) FCB_RETURN_IF_ERROR(ex->SetInput(name, bytes.data(), bytes.size()));
  FCB_RETURN_IF_ERROR(ex->Run());
  std::vector<std::vector<uint8_t>> outs;
  for (size_t i = 0; i < ex->info().outputs.size(); ++i) {
    const auto* d = static_cast<const uint8_t*>(ex->output_data(i));
    outs.emplace_back(d, d + ex->info().outputs[i].bytes());
  }
  return outs;
}

std::vector<uint8_t> Bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

class ConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = TestDataDir();
    for (const char* f : {"tiny_decoder.prefill.onnx", "tiny_decoder.decode.onnx", "tiny_decoder.prompt.npy"})
      ASSERT_TRUE(testing::FileExists(dir + "/" + f)) << f << " is missing: run scripts/prepare_testdata.sh";
    const std::string path = tmp_.File("three_methods.fcb");
    CompileSpec spec;
    spec.targets = {"all"};
    spec.input_shapes["cnn:input"] = {1, 3, 64, 64};
    auto r = CompileMethods({{"prefill", dir + "/tiny_decoder.prefill.onnx"},
                             {"decode", dir + "/tiny_decoder.decode.onnx"},
                             {"cnn", std::string(FCB_SOURCE_DIR) + "/models/demo_cnn.onnx"}},
                            spec, path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto p = Program::Load(path);  // the best target this host runs
    ASSERT_TRUE(p.ok()) << p.status().message();
    program_ = p.value();

    auto prompt = ReadNpy(dir + "/tiny_decoder.prompt.npy");
    ASSERT_TRUE(prompt.ok());
    Job prefill{"prefill", {{"tokens", prompt.value().data}}, 1, {}};
    // Decode one step after the prompt, from the cache prefill made.
    auto first = RunOnce(program_, prefill);
    ASSERT_TRUE(first.ok()) << first.status().message();
    const int64_t token = 5, pos = 8;
    Job decode{"decode",
               {{"token", Bytes(&token, 8)}, {"pos", Bytes(&pos, 8)}, {"k_cache", first.value()[1]},
                {"v_cache", first.value()[2]}},
               2,
               {}};
    std::vector<float> image(3 * 64 * 64);
    for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 7919) % 255) / 127.5f - 1.f;
    Job cnn{"cnn", {{"input", Bytes(image.data(), image.size() * 4)}}, 2, {}};
    jobs_ = {prefill, decode, cnn};
    for (Job& j : jobs_) {
      auto out = RunOnce(program_, j);
      ASSERT_TRUE(out.ok()) << j.method << ": " << out.status().message();
      j.expected = out.value();
    }
  }

  TempDir tmp_;
  std::shared_ptr<const Program> program_;
  std::vector<Job> jobs_;
};

// Each thread keeps one execution and runs it over and over.
TEST_F(ConcurrencyTest, MethodsRunOnThreadsAtOnceAndStayCorrect) {
  constexpr int kIterations = 200;
  std::atomic<int> mismatches{0}, failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  // Two threads per method: the same method concurrently too.
  for (int copy = 0; copy < 2; ++copy) {
    for (const Job& job : jobs_) {
      threads.emplace_back([&, job_ptr = &job] {
        const Job& j = *job_ptr;
        auto ex = Execution::Create(program_, j.method, j.threads);
        if (!ex.ok()) {
          failures++;
          return;
        }
        while (!go.load()) std::this_thread::yield();
        for (int it = 0; it < kIterations; ++it) {
          for (const auto& [name, bytes] : j.inputs)
            if (!ex.value()->SetInput(name, bytes.data(), bytes.size()).ok()) failures++;
          if (!ex.value()->Run().ok()) {
            failures++;
            continue;
          }
          for (size_t o = 0; o < j.expected.size(); ++o)
            if (std::memcmp(ex.value()->output_data(o), j.expected[o].data(), j.expected[o].size()) != 0)
              mismatches++;
        }
      });
    }
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// Executions created and destroyed while others run: arenas and thread pools
// come and go, the program and its weight mapping stay.
TEST_F(ConcurrencyTest, ExecutionsComeAndGoWhileOthersRun) {
  constexpr int kIterations = 50;
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (const Job& job : jobs_) {
    threads.emplace_back([&, job_ptr = &job] {
      for (int it = 0; it < kIterations; ++it) {
        auto out = RunOnce(program_, *job_ptr);
        if (!out.ok()) {
          failures++;
          continue;
        }
        if (out.value() != job_ptr->expected) mismatches++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// The last reference to the program may be dropped on any thread: executions
// keep it alive.
TEST_F(ConcurrencyTest, ExecutionsKeepTheProgramAlive) {
  auto a = Execution::Create(program_, "decode", 1);
  auto b = Execution::Create(program_, "cnn", 1);
  ASSERT_TRUE(a.ok() && b.ok());
  program_.reset();
  std::thread ta([&] {
    for (const auto& [name, bytes] : jobs_[1].inputs) ASSERT_TRUE(a.value()->SetInput(name, bytes.data(), bytes.size()).ok());
    ASSERT_TRUE(a.value()->Run().ok());
    EXPECT_EQ(std::memcmp(a.value()->output_data(0), jobs_[1].expected[0].data(), jobs_[1].expected[0].size()), 0);
    a.value().reset();
  });
  std::thread tb([&] {
    for (const auto& [name, bytes] : jobs_[2].inputs) ASSERT_TRUE(b.value()->SetInput(name, bytes.data(), bytes.size()).ok());
    ASSERT_TRUE(b.value()->Run().ok());
    EXPECT_EQ(std::memcmp(b.value()->output_data(0), jobs_[2].expected[0].data(), jobs_[2].expected[0].size()), 0);
    b.value().reset();
  });
  ta.join();
  tb.join();
}

}  // namespace
}  // namespace fcb
