// The runtime resolves a plan with ranges at each new combination of sizes
// incrementally from its check at the bound (ops::ResolvePlan: only the steps
// whose operands change are inferred again). This checks that it gives what
// the full checker gives at the same sizes (ops::CheckPlan with the input
// shapes: every tensor's shape, the values computed from shapes, the guards,
// the scratch) at every size of the test models' ranges: BERT at 1..512, the
// decoder's prefill at 1..64 and decode at past 1..1023, resnet18 on a grid
// of 64..512 by 64..512. Each size is also resolved over the resolution of
// the size before (its storage reused, as the runtime's cache does).
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "fcb/fcb.h"
#include "ops/plan_check.h"
#include "runtime/program_impl.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

class Weights final : public ops::PlanWeights {
 public:
  explicit Weights(const format::LoadedFile& f) : f_(f) {}
  size_t count() const override { return f_.desc().blobs.size(); }
  uint64_t size(int32_t blob) const override { return f_.desc().blobs[blob].size; }
  const void* data(int32_t blob) const override { return f_.blob_data(blob); }
  Status Verify(int32_t, const std::string&) override { return Status::Ok(); }

 private:
  const format::LoadedFile& f_;
};

// The symbols' values to resolve a plan at (one list per resolution).
using SizesFn = std::function<std::vector<std::vector<int64_t>>(const format::ContextDesc&)>;

// Every symbol moving together from its low end: lo + i for i = 0, 1, ...
// up to the first symbol's range (the test models' symbols are one size
// under several names, such as a past and a mask one longer).
std::vector<std::vector<int64_t>> Together(const format::ContextDesc& c) {
  std::vector<std::vector<int64_t>> v;
  for (int64_t i = 0; i <= c.symbols[0].hi - c.symbols[0].lo; ++i) {
    std::vector<int64_t> one;
    for (const auto& sym : c.symbols) one.push_back(std::min(sym.lo + i, sym.hi));
    v.push_back(std::move(one));
  }
  return v;
}

// Compiles `methods` with `spec` for the generic target and, for each
// method and each list of symbol values `sizes` gives, compares the
// incremental resolution with the full check.
void ExpectResolutionsMatchFullChecks(const std::map<std::string, std::string>& methods, const CompileSpec& spec,
                                      const SizesFn& sizes_of) {
  TempDir tmp;
  const std::string out = tmp.File("model.fcb");
  auto report = CompileMethods(methods, spec, out);
  ASSERT_TRUE(report.ok()) << report.status().message();
  LoadOptions lo;
  lo.target = "generic";
  auto program = Program::Load(out, lo);
  ASSERT_TRUE(program.ok()) << program.status().message();
  const ProgramImpl& p = ProgramAccess::Of(*program.value());
  Weights weights(*p.file);
  int compared = 0;
  for (const PreparedMethod& m : p.methods) {
    ASSERT_TRUE(m.dynamic() && m.bound_plan) << m.info.name;
    const format::ContextDesc& c = *m.context;
    // One resolution resolved over again at every size, as an execution's
    // cache does with its least recently used entry: the same as a new one.
    ops::ResolvedPlan reused;
    for (const auto& values : sizes_of(c)) {
      ASSERT_EQ(values.size(), c.symbols.size());
      std::vector<ir::Shape> shapes;
      std::string sizes;
      for (size_t i = 0; i < m.info.inputs.size(); ++i) {
        ir::Shape s = m.info.inputs[i].shape;
        for (size_t d = 0; d < s.size(); ++d)
          if (m.input_symbols[i][d] >= 0) s[d] = values[m.input_symbols[i][d]];
        shapes.push_back(std::move(s));
      }
      for (size_t k = 0; k < values.size(); ++k) sizes += c.symbols[k].name + "=" + std::to_string(values[k]) + " ";
      SCOPED_TRACE("method " + m.info.name + " at " + sizes);
      auto full = ops::CheckPlan(c, weights, &shapes);
      ASSERT_TRUE(full.ok()) << full.status().message();
      ops::ResolvedPlan r;
      Status s = ops::ResolvePlan(c, *m.bound_plan, shapes, &r);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(ops::ResolutionDifference(c, full.value(), r), "");
      s = ops::ResolvePlan(c, *m.bound_plan, shapes, &reused);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(ops::ResolutionDifference(c, full.value(), reused), "") << "resolved over an earlier resolution";
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(ResolvePlan, BertAtEveryLengthMatchesTheFullCheck) {
  const std::string model = TestDataDir() + "/bert_dyn.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  CompileSpec spec;
  spec.targets = {"generic"};
  spec.input_shapes["main:input_ids"] = {1, {1, 512}};
  spec.input_shapes["main:attention_mask"] = {1, {1, 512}};
  ExpectResolutionsMatchFullChecks({{"main", model}}, spec, Together);
}

TEST(ResolvePlan, DecoderAtEveryPromptAndPastLengthMatchesTheFullCheck) {
  const std::string model = TestDataDir() + "/decoder_merged.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  CompileSpec spec;
  spec.targets = {"generic"};
  NpyArray flag;
  flag.dtype = static_cast<int32_t>(DType::kBool);
  flag.shape = {1};
  flag.data = {0};
  spec.input_values["prefill:use_cache_branch"] = flag;
  flag.data = {1};
  spec.input_values["decode:use_cache_branch"] = flag;
  spec.input_shapes["prefill:input_ids"] = {1, {1, 64}};
  spec.input_shapes["prefill:attention_mask"] = {1, {1, 64}};
  spec.input_shapes["decode:input_ids"] = {1, 1};
  spec.input_shapes["decode:attention_mask"] = {1, {2, 1024}};
  for (const char* p : {"past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key",
                        "past_key_values.1.value"}) {
    spec.input_shapes[std::string("prefill:") + p] = {1, 4, 1, 16};
    spec.input_shapes[std::string("decode:") + p] = {1, 4, {1, 1023}, 16};
  }
  ExpectResolutionsMatchFullChecks({{"prefill", model}, {"decode", model}}, spec, Together);
}

TEST(ResolvePlan, ResnetOnAGridOfSizesMatchesTheFullCheck) {
  const std::string model = TestDataDir() + "/resnet18_dyn.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  CompileSpec spec;
  spec.targets = {"generic"};
  spec.input_shapes["main:input"] = {1, 3, {64, 512}, {64, 512}};
  ExpectResolutionsMatchFullChecks({{"main", model}}, spec, [](const format::ContextDesc& c) {
    std::vector<std::vector<int64_t>> grid;
    EXPECT_EQ(c.symbols.size(), 2u);
    for (int64_t h = 64; h <= 512; h += 29)
      for (int64_t w = 64; w <= 512; w += 31) grid.push_back({h, w});
    grid.push_back({512, 511});
    grid.push_back({511, 512});
    return grid;
  });
}

}  // namespace
}  // namespace fcb
