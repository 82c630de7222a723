// The models whose inputs vary in length or size (scripts/export_dynamic_models.py),
// each compiled once with its dims bounded (ranges) and run at many sizes:
// a BERT-like encoder with a dynamic sequence axis (1..512), resnet18 with
// dynamic height and width (64..512), and a decoder in the form the common
// exporter writes (past_key_values inputs, present outputs past+seq long, the
// graphs with and without a cache merged under one If on use_cache_branch,
// whose branch subgraphs name their outputs exactly like the If's own
// outputs) as two methods of one file: prefill (use_cache_branch false,
// prompt 1..64) and decode (true, past 1..1023). Every reference case
// (CASE.feeds/NAME.npy -> ONNX Runtime's CASE.ref/NAME.npy) runs through its
// method on every target the host runs and matches within 1e-4 relative L2
// per output, with the reference's output shapes; greedy generation through
// prefill and decode gives ONNX Runtime's 48 tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "fcb/npy.h"
#include "per_target.h"
#include "reference_compare.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;
using testing::TestDataDir;

// One method of a model: the dims the spec gives its inputs (ranges where
// the model leaves a dim free), its fixed inputs, and the reference cases it runs.
struct MethodSpec {
  std::string name;
  std::map<std::string, std::vector<InputDim>> shapes;
  bool use_cache_branch = false, has_cache_flag = false;
  std::vector<std::string> cases;  // case folder stems
};

struct Model {
  const char* name;  // the .onnx file's stem
  std::vector<MethodSpec> methods;
};

std::map<std::string, std::vector<InputDim>> PastShapes(InputDim past) {
  std::map<std::string, std::vector<InputDim>> s;
  for (const char* p : {"past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key",
                        "past_key_values.1.value"})
    s[p] = {1, 4, past, 16};
  return s;
}

MethodSpec Prefill() {
  MethodSpec m{"prefill", PastShapes(1), false, true, {"decoder_merged.prefill.T1", "decoder_merged.prefill.T64"}};
  m.shapes["input_ids"] = {1, {1, 64}};
  m.shapes["attention_mask"] = {1, {1, 64}};
  return m;
}

MethodSpec Decode() {
  MethodSpec m{"decode", PastShapes({1, 1023}), true, true, {"decoder_merged.decode.P1", "decoder_merged.decode.P1023"}};
  m.shapes["input_ids"] = {1, 1};
  m.shapes["attention_mask"] = {1, {2, 1024}};
  return m;
}

const Model kBert{"bert_dyn",
                  {{"main",
                    {{"input_ids", {1, {1, 512}}}, {"attention_mask", {1, {1, 512}}}},
                    false,
                    false,
                    {"bert_dyn.L1", "bert_dyn.L7", "bert_dyn.L64", "bert_dyn.L333", "bert_dyn.L512"}}}};
const Model kResnet{"resnet18_dyn",
                    {{"main",
                      {{"input", {1, 3, {64, 512}, {64, 512}}}},
                      false,
                      false,
                      {"resnet18_dyn.64x64", "resnet18_dyn.224x224", "resnet18_dyn.97x131", "resnet18_dyn.512x512"}}}};
const Model kDecoder{"decoder_merged", {Prefill(), Decode()}};

NpyArray Bool(bool b) {
  NpyArray a;
  a.dtype = static_cast<int32_t>(DType::kBool);
  a.shape = {1};
  a.data = {static_cast<uint8_t>(b)};
  return a;
}

// The spec of `methods` for `targets`; `at_bound` fixes every range to its upper end.
CompileSpec SpecOf(const std::vector<MethodSpec>& methods, std::vector<std::string> targets, bool at_bound = false) {
  CompileSpec spec;
  spec.targets = std::move(targets);
  for (const auto& m : methods) {
    for (auto [name, dims] : m.shapes) {
      if (at_bound)
        for (auto& d : dims) d = InputDim(d.hi);
      spec.input_shapes[m.name + ":" + name] = dims;
    }
    if (m.has_cache_flag) spec.input_values[m.name + ":use_cache_branch"] = Bool(m.use_cache_branch);
  }
  return spec;
}

std::vector<float> Floats(const void* p, uint64_t bytes) {
  std::vector<float> v(bytes / 4);
  std::memcpy(v.data(), p, v.size() * 4);
  return v;
}

class DynamicModel : public ::testing::TestWithParam<Model> {
 protected:
  void SetUp() override {
    dir_ = TestDataDir();
    model_ = dir_ + "/" + GetParam().name + ".onnx";
    ASSERT_TRUE(testing::FileExists(model_)) << model_ << " is missing: run scripts/prepare_testdata.sh";
  }
  std::map<std::string, std::string> Methods() const {
    std::map<std::string, std::string> m;
    for (const auto& ms : GetParam().methods) m[ms.name] = model_;
    return m;
  }
  std::string dir_, model_;
};

TEST_P(DynamicModel, OneMethodPerRangeMatchesOnnxRuntimeAtEverySizeOnEveryTarget) {
  TempDir tmp;
  const std::string out = tmp.File("model.fcb");
  auto report = CompileMethods(Methods(), SpecOf(GetParam().methods, {"all"}), out);
  ASSERT_TRUE(report.ok()) << report.status().message();

  int compared = 0;
  testing::ForEachRunnableTarget(out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    for (const auto& m : GetParam().methods) {
      // One execution per method runs every case: each size is chosen at its run.
      auto ex = Execution::Create(program, m.name, 1);
      ASSERT_TRUE(ex.ok()) << ex.status().message();
      const MethodInfo& info = ex.value()->info();
      for (const auto& stem : m.cases) {
        SCOPED_TRACE(stem + " through method " + m.name + " on " + target);
        const auto feeds = testing::ReadNpyFolder(dir_ + "/" + stem + ".feeds");
        const auto want = testing::ReadNpyFolder(dir_ + "/" + stem + ".ref");
        ASSERT_FALSE(want.empty()) << "no reference for " << stem << ": run scripts/prepare_testdata.sh";
        // use_cache_branch is fixed at compile time, so it is no input.
        ASSERT_EQ(info.inputs.size(), feeds.size() - feeds.count("use_cache_branch"));
        for (const auto& in : info.inputs) {
          auto f = feeds.find(in.name);
          ASSERT_NE(f, feeds.end()) << in.name;
          Status s = ex.value()->SetInput(in.name, f->second.data.data(), f->second.data.size(), f->second.shape);
          ASSERT_TRUE(s.ok()) << in.name << ": " << s.message();
        }
        Status s = ex.value()->Run();
        ASSERT_TRUE(s.ok()) << s.message();
        ASSERT_NO_FATAL_FAILURE(testing::ExpectOutputsMatch(*ex.value(), want, 1e-4, stem, &compared));
      }
    }
  });
  EXPECT_GT(compared, 0);
}

// The methods share their weights: the file with every method (each with
// its ranges) stores exactly the weights of the last method's file alone,
// and is at most 1 % larger than it beyond the other methods' plans (which
// for these small test models are a few percent of the file; a real
// decoder's weights dwarf them); every target reads one pool (target-neutral
// packing). Against a method compiled for exactly one size a range keeps
// what that size would fold away (a positional table's rows beyond it), so
// the comparison is with the same ranges.
TEST_P(DynamicModel, MethodsAndTargetsShareTheWeights) {
  TempDir tmp;
  const MethodSpec& last = GetParam().methods.back();
  const std::map<std::string, std::string> one_method = {{last.name, model_}};
  ASSERT_TRUE(CompileMethods(one_method, SpecOf({last}, {"generic"}), tmp.File("one.fcb")).ok());
  ASSERT_TRUE(CompileMethods(Methods(), SpecOf(GetParam().methods, {"generic"}), tmp.File("methods.fcb")).ok());
  ASSERT_TRUE(CompileMethods(Methods(), SpecOf(GetParam().methods, {"all"}), tmp.File("all.fcb")).ok());
  auto one = InspectFile(tmp.File("one.fcb"));
  auto methods = InspectFile(tmp.File("methods.fcb"));
  auto all = InspectFile(tmp.File("all.fcb"));
  ASSERT_TRUE(one.ok() && methods.ok() && all.ok());
  EXPECT_GT(one.value().weight_pool.bytes, 500000u);  // each model's weights: 0.5 MB of float32 or more
  EXPECT_EQ(methods.value().weight_pool.bytes, one.value().weight_pool.bytes);
  EXPECT_EQ(all.value().weight_pool.bytes, one.value().weight_pool.bytes);
  uint64_t other_plans = 0;
  for (const auto& c : methods.value().contexts)
    if (c.method != last.name) other_plans += c.share.plan_bytes;
  EXPECT_LE((methods.value().file_size - other_plans) * 100, one.value().file_size * 101)
      << "one method: " << one.value().file_size << " bytes; every method: " << methods.value().file_size
      << " (other methods' plans: " << other_plans << ")";
}

INSTANTIATE_TEST_SUITE_P(Exported, DynamicModel, ::testing::Values(kBert, kResnet, kDecoder),
                         [](const ::testing::TestParamInfo<Model>& i) { return std::string(i.param.name); });

// One input of a run: its bytes and shape.
struct Feed {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> shape;
};
template <typename T>
Feed FeedOf(const std::vector<T>& v, std::vector<int64_t> shape) {
  Feed f;
  f.bytes.resize(v.size() * sizeof(T));
  std::memcpy(f.bytes.data(), v.data(), f.bytes.size());
  f.shape = std::move(shape);
  return f;
}

// Runs `method` of `file` at `runs` sizes one after another in one execution
// (more sizes than its cache of 16 resolutions holds, so sizes are resolved
// anew, evicted and resolved again) and each of them in a fresh execution,
// where it is the first size resolved: every output has the same shape and
// the same bytes (the same kernels run on the same inputs), on every target.
// `twice` (where given, per run): the run is made twice in a row in both
// executions (the second at a size runs kernels made for exactly it).
void ExpectSequenceMatchesFreshResolutions(const std::string& file, const std::string& method,
                                           const std::vector<std::map<std::string, Feed>>& runs,
                                           const std::vector<bool>& twice = {}) {
  int compared = 0;
  testing::ForEachRunnableTarget(file, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    auto seq = Execution::Create(program, method, 1);
    ASSERT_TRUE(seq.ok()) << seq.status().message();
    for (size_t r = 0; r < runs.size(); ++r) {
      SCOPED_TRACE("run " + std::to_string(r) + " of method " + method + " on " + target);
      auto fresh = Execution::Create(program, method, 1);
      ASSERT_TRUE(fresh.ok()) << fresh.status().message();
      for (Execution* ex : {seq.value().get(), fresh.value().get()}) {
        for (const auto& [name, f] : runs[r]) {
          Status s = ex->SetInput(name, f.bytes.data(), f.bytes.size(), f.shape);
          ASSERT_TRUE(s.ok()) << name << ": " << s.message();
        }
        Status s = ex->Run();
        ASSERT_TRUE(s.ok()) << s.message();
        if (r < twice.size() && twice[r]) {
          s = ex->Run();
          ASSERT_TRUE(s.ok()) << s.message();
        }
      }
      const Execution& a = *seq.value();
      const Execution& b = *fresh.value();
      for (size_t o = 0; o < a.info().outputs.size(); ++o) {
        ASSERT_EQ(a.output_shape(o), b.output_shape(o)) << a.info().outputs[o].name;
        ASSERT_EQ(a.output_bytes(o), b.output_bytes(o)) << a.info().outputs[o].name;
        EXPECT_EQ(std::memcmp(a.output_data(o), b.output_data(o), a.output_bytes(o)), 0)
            << a.info().outputs[o].name << " differs from the same size resolved in a fresh execution";
        ++compared;
      }
    }
  });
  EXPECT_GT(compared, 0);
}

// BERT at every length 1..64 in a shuffled order, then the first 20 of that
// order again (each evicted from the cache by then), then the upper bound
// (where every shape is the bound's again) and lengths after it; every fifth
// run made twice (kernels made for exactly its size, then resolved over).
TEST(DynamicResolution, BertAtManyLengthsInSequenceMatchesEachLengthResolvedAlone) {
  const std::string dir = TestDataDir();
  const std::string model = dir + "/bert_dyn.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  const auto feeds = testing::ReadNpyFolder(dir + "/bert_dyn.L512.feeds");
  ASSERT_TRUE(feeds.count("input_ids") && feeds.count("attention_mask")) << "run scripts/prepare_testdata.sh";
  TempDir tmp;
  const std::string out = tmp.File("bert.fcb");
  ASSERT_TRUE(CompileMethods({{"main", model}}, SpecOf(kBert.methods, {"all"}), out).ok());
  std::vector<int64_t> lengths;
  for (int64_t l = 1; l <= 64; ++l) lengths.push_back(l);
  std::mt19937 rng(34);
  for (size_t i = lengths.size(); i > 1; --i) std::swap(lengths[i - 1], lengths[rng() % i]);
  for (size_t i = 0; i < 20; ++i) lengths.push_back(lengths[i]);
  for (int64_t l : {512, 7, 512, 64}) lengths.push_back(l);
  std::vector<std::map<std::string, Feed>> runs;
  std::vector<bool> twice;
  for (int64_t l : lengths) {
    twice.push_back(runs.size() % 5 == 0);
    std::map<std::string, Feed> run;
    for (const char* name : {"input_ids", "attention_mask"}) {
      const NpyArray& a = feeds.at(name);  // [1, 512] int64: its first l
      std::vector<int64_t> v(l);
      std::memcpy(v.data(), a.data.data(), l * 8);
      if (std::string(name) == "attention_mask" && l > 2) v[l - 1] = 0;  // a padded position
      run[name] = FeedOf(v, {1, l});
    }
    runs.push_back(std::move(run));
  }
  ExpectSequenceMatchesFreshResolutions(out, "main", runs, twice);
}

// The decoder's decode method at past lengths 1..200 one after another, as
// generation runs it (each a new size), with the prefill at 1..40 prompts.
TEST(DynamicResolution, DecoderAtManyPastLengthsInSequenceMatchesEachResolvedAlone) {
  const std::string dir = TestDataDir();
  const std::string model = dir + "/decoder_merged.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  TempDir tmp;
  const std::string out = tmp.File("decoder.fcb");
  ASSERT_TRUE(CompileMethods({{"prefill", model}, {"decode", model}}, SpecOf({Prefill(), Decode()}, {"all"}), out).ok());
  std::mt19937 rng(35);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  auto floats = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(rng);
    return v;
  };
  const std::vector<std::string> pasts = {"past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key",
                                          "past_key_values.1.value"};
  std::vector<std::map<std::string, Feed>> decode, prefill;
  for (int64_t past = 1; past <= 200; ++past) {
    std::map<std::string, Feed> run;
    run["input_ids"] = FeedOf(std::vector<int64_t>{static_cast<int64_t>(rng() % 50)}, {1, 1});
    run["attention_mask"] = FeedOf(std::vector<int64_t>(past + 1, 1), {1, past + 1});
    for (const auto& p : pasts) run[p] = FeedOf(floats(4 * past * 16), {1, 4, past, 16});
    decode.push_back(std::move(run));
  }
  for (int64_t t = 1; t <= 40; ++t) {
    std::map<std::string, Feed> run;
    std::vector<int64_t> ids(t);
    for (auto& id : ids) id = static_cast<int64_t>(rng() % 50);
    run["input_ids"] = FeedOf(ids, {1, t});
    run["attention_mask"] = FeedOf(std::vector<int64_t>(t, 1), {1, t});
    for (const auto& p : pasts) run[p] = FeedOf(std::vector<float>(4 * 16, 0.f), {1, 4, 1, 16});
    prefill.push_back(std::move(run));
  }
  ExpectSequenceMatchesFreshResolutions(out, "decode", decode);
  ExpectSequenceMatchesFreshResolutions(out, "prefill", prefill);
}

// resnet18 at 20 sizes (height and width apart, odd ones, both sides of the
// size where its layers change between Winograd and the direct convolution).
TEST(DynamicResolution, ResnetAtManySizesInSequenceMatchesEachResolvedAlone) {
  const std::string dir = TestDataDir();
  const std::string model = dir + "/resnet18_dyn.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  TempDir tmp;
  const std::string out = tmp.File("resnet.fcb");
  ASSERT_TRUE(CompileMethods({{"main", model}}, SpecOf(kResnet.methods, {"all"}), out).ok());
  std::mt19937 rng(36);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<std::map<std::string, Feed>> runs;
  for (int i = 0; i < 20; ++i) {
    const int64_t h = 64 + 7 * i, w = 64 + 11 * ((i * 7) % 20);
    std::vector<float> x(3 * h * w);
    for (auto& v : x) v = uniform(rng);
    runs.push_back({{"input", FeedOf(x, {1, 3, h, w})}});
  }
  ExpectSequenceMatchesFreshResolutions(out, "main", runs);
}

// The decode method at past lengths drawn at random within its range, in a
// random order with repeats: both bounds, their neighbours and 16 random
// lengths (20 distinct, more than the 16 resolutions an execution keeps, so
// lengths are evicted and resolved again), 48 runs in one execution. Each run's
// outputs match, within 1e-4 relative L2 and with the same shapes, what the
// same inputs give through the decode method compiled for exactly that length
// (a plan with no ranges: nothing resolved at run time), on every target; at
// the bounds they also match ONNX Runtime's reference. Between runs, shapes
// outside the ranges are refused by SetInput (naming the range), a past
// disagreeing with the others and a mask not one longer than the past are
// refused by Run, and the execution goes on giving the right outputs.
TEST(DynamicResolution, DecodeAtRandomPastLengthsMatchesMethodsCompiledForEachLength) {
  const std::string dir = TestDataDir();
  const std::string model = dir + "/decoder_merged.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  TempDir tmp;
  const std::string ranged = tmp.File("ranged.fcb");
  ASSERT_TRUE(CompileMethods({{"decode", model}}, SpecOf({Decode()}, {"all"}), ranged).ok());
  std::mt19937 rng(341);
  std::vector<int64_t> lengths = {1, 2, 1022, 1023};
  while (lengths.size() < 20) {
    const int64_t p = 3 + static_cast<int64_t>(rng() % 1019);
    if (std::find(lengths.begin(), lengths.end(), p) == lengths.end()) lengths.push_back(p);
  }
  // Each length compiled alone, fixed: the oracle.
  std::map<int64_t, std::string> exact;
  for (int64_t p : lengths) {
    MethodSpec m = Decode();
    m.shapes = PastShapes(p);
    m.shapes["input_ids"] = {1, 1};
    m.shapes["attention_mask"] = {1, p + 1};
    exact[p] = tmp.File("exact" + std::to_string(p) + ".fcb");
    auto report = CompileMethods({{"decode", model}}, SpecOf({m}, {"all"}), exact[p]);
    ASSERT_TRUE(report.ok()) << "past " << p << ": " << report.status().message();
  }
  std::vector<int64_t> order = lengths;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  while (order.size() < 48) order.push_back(lengths[rng() % lengths.size()]);
  const std::vector<std::string> pasts = {"past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key",
                                          "past_key_values.1.value"};
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  auto feeds_at = [&](int64_t past) {
    std::map<std::string, Feed> run;
    run["input_ids"] = FeedOf(std::vector<int64_t>{static_cast<int64_t>(rng() % 50)}, {1, 1});
    run["attention_mask"] = FeedOf(std::vector<int64_t>(past + 1, 1), {1, past + 1});
    for (const auto& p : pasts) {
      std::vector<float> v(4 * past * 16);
      for (auto& x : v) x = uniform(rng);
      run[p] = FeedOf(v, {1, 4, past, 16});
    }
    return run;
  };
  std::vector<std::map<std::string, Feed>> runs;
  for (int64_t p : order) runs.push_back(feeds_at(p));
  // ONNX Runtime's references at the bounds, as two more runs in the middle of the sequence.
  std::vector<std::string> ref_cases = {"decoder_merged.decode.P1", "decoder_merged.decode.P1023"};
  int compared = 0, refused = 0, compared_ort = 0;
  for (const std::string& target : testing::RunnableTargetNames(testing::ApiTargets())) {
    SCOPED_TRACE(target);
    LoadOptions lo;
    lo.target = target;
    auto program = Program::Load(ranged, lo);
    ASSERT_TRUE(program.ok()) << program.status().message();
    auto made = Execution::Create(program.value(), "decode", 1);
    ASSERT_TRUE(made.ok()) << made.status().message();
    Execution& ex = *made.value();
    auto set = [&](Execution& e, const std::map<std::string, Feed>& run) {
      for (const auto& [name, f] : run) {
        Status s = e.SetInput(name, f.bytes.data(), f.bytes.size(), f.shape);
        ASSERT_TRUE(s.ok()) << name << ": " << s.message();
      }
    };
    for (size_t r = 0; r < runs.size(); ++r) {
      const int64_t past = order[r];
      SCOPED_TRACE("run " + std::to_string(r) + " at past " + std::to_string(past));
      if (r % 6 == 3) {
        // Outside the ranges: refused, nothing changes.
        const std::vector<float> kv(4 * 1024 * 16, 0.5f);
        EXPECT_REFUSED(ex.SetInput(pasts[r % 4], kv.data(), kv.size() * 4, {1, 4, 1024, 16}), StatusCode::kInvalidArgument,
                       "1..1023");
        EXPECT_REFUSED(ex.SetInput(pasts[r % 4], kv.data(), 0, {1, 4, 0, 16}), StatusCode::kInvalidArgument, "1..1023");
        const std::vector<int64_t> mask(1025, 1);
        EXPECT_REFUSED(ex.SetInput("attention_mask", mask.data(), mask.size() * 8, {1, 1025}),
                       StatusCode::kInvalidArgument, "2..1024");
        refused += 3;
      }
      if (r % 6 == 1) {
        // A mask that is not one longer than the past: sizes within their
        // ranges that the method's steps cannot take together. Run refuses,
        // naming the relation and the inputs that broke it.
        ASSERT_NO_FATAL_FAILURE(set(ex, runs[r]));
        const int64_t total = past + 1 == 1024 ? past : past + 2;
        const std::vector<int64_t> mask(total, 1);
        ASSERT_TRUE(ex.SetInput("attention_mask", mask.data(), mask.size() * 8, {1, total}).ok());
        const Status s = ex.Run();
        EXPECT_REFUSED(s, StatusCode::kInvalidArgument, "total_sequence_length == past_sequence_length+1");
        EXPECT_NE(s.message().find("input 'attention_mask' dim 1 (total_sequence_length = " + std::to_string(total) + ")"),
                  std::string::npos) << s.message();
        EXPECT_NE(s.message().find("(past_sequence_length = " + std::to_string(past) + ")"), std::string::npos)
            << s.message();
        ++refused;
      }
      if (r % 6 == 5) {
        // One past a different length from the others (one symbol, one size per run): Run refuses.
        ASSERT_NO_FATAL_FAILURE(set(ex, runs[r]));
        const int64_t other = past == 1023 ? 1022 : past + 1;
        const std::vector<float> kv(4 * other * 16, 0.25f);
        ASSERT_TRUE(ex.SetInput(pasts[0], kv.data(), kv.size() * 4, {1, 4, other, 16}).ok());
        EXPECT_REFUSED(ex.Run(), StatusCode::kInvalidArgument, "one size per run");
        ++refused;
      }
      ASSERT_NO_FATAL_FAILURE(set(ex, runs[r]));
      Status s = ex.Run();
      ASSERT_TRUE(s.ok()) << s.message();
      auto exact_program = Program::Load(exact.at(past), lo);
      ASSERT_TRUE(exact_program.ok()) << exact_program.status().message();
      auto want = Execution::Create(exact_program.value(), "decode", 1);
      ASSERT_TRUE(want.ok()) << want.status().message();
      ASSERT_NO_FATAL_FAILURE(set(*want.value(), runs[r]));
      ASSERT_TRUE(want.value()->Run().ok());
      const auto& outs = ex.info().outputs;
      ASSERT_EQ(outs.size(), want.value()->info().outputs.size());
      for (size_t o = 0; o < outs.size(); ++o) {
        ASSERT_EQ(outs[o].name, want.value()->info().outputs[o].name);
        ASSERT_EQ(ex.output_shape(o), want.value()->output_shape(o)) << outs[o].name;
        const std::vector<float> got = Floats(ex.output_data(o), ex.output_bytes(o));
        const std::vector<float> ref = Floats(want.value()->output_data(o), want.value()->output_bytes(o));
        EXPECT_LE(testing::Compare(got, ref).rel_l2, 1e-4) << outs[o].name;
        ++compared;
      }
      if (r == runs.size() / 3 || r == 2 * runs.size() / 3) {
        const std::string stem = ref_cases[r == runs.size() / 3 ? 0 : 1];
        SCOPED_TRACE(stem);
        const auto feeds = testing::ReadNpyFolder(dir + "/" + stem + ".feeds");
        const auto ref = testing::ReadNpyFolder(dir + "/" + stem + ".ref");
        ASSERT_FALSE(ref.empty()) << "no reference for " << stem << ": run scripts/prepare_testdata.sh";
        for (const auto& in : ex.info().inputs) {
          const NpyArray& a = feeds.at(in.name);
          ASSERT_TRUE(ex.SetInput(in.name, a.data.data(), a.data.size(), a.shape).ok()) << in.name;
        }
        ASSERT_TRUE(ex.Run().ok());
        ASSERT_NO_FATAL_FAILURE(testing::ExpectOutputsMatch(ex, ref, 1e-4, stem, &compared_ort));
      }
    }
  }
  EXPECT_GT(compared, 0);
  EXPECT_GT(compared_ort, 0);
  EXPECT_GT(refused, 0);
}

// Greedy generation with the merged decoder's two methods: prefill runs the
// prompt (a dummy past of length 1, which that branch does not read), then
// each decode step runs the previous token with the presents fed back as the
// past, one longer each time. Every target gives ONNX Runtime's 48 tokens,
// and the logits each token was chosen from match within 1e-4.
TEST(DynamicDecoder, GreedyGenerationGivesOnnxRuntimesTokensOnEveryTarget) {
  const std::string dir = TestDataDir();
  const std::string model = dir + "/decoder_merged.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  auto prompt = ReadNpy(dir + "/decoder_merged.prompt.npy");
  ASSERT_TRUE(prompt.ok()) << prompt.status().message();
  const auto ref = testing::ReadNpyFolder(dir + "/decoder_merged.gen.ref");
  ASSERT_TRUE(ref.count("tokens") && ref.count("logits")) << "run scripts/prepare_testdata.sh";
  const NpyArray& ref_tokens = ref.at("tokens");
  const int n = static_cast<int>(ref_tokens.shape[0]);
  const int vocab = static_cast<int>(ref.at("logits").shape[1]);
  const int64_t t = prompt.value().shape[1];
  std::vector<int64_t> want(n);
  std::memcpy(want.data(), ref_tokens.data.data(), n * 8);
  const std::vector<float> want_logits = Floats(ref.at("logits").data.data(), ref.at("logits").data.size());

  TempDir tmp;
  const std::string out = tmp.File("decoder.fcb");
  auto report = CompileMethods({{"prefill", model}, {"decode", model}}, SpecOf({Prefill(), Decode()}, {"all"}), out);
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::vector<std::string> pasts = {"past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key",
                                          "past_key_values.1.value"};
  int generated = 0;
  testing::ForEachRunnableTarget(out, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
    SCOPED_TRACE(target);
    auto prefill = Execution::Create(program, "prefill", 1);
    auto decode = Execution::Create(program, "decode", 1);
    ASSERT_TRUE(prefill.ok() && decode.ok());
    Execution& pf = *prefill.value();
    Execution& dc = *decode.value();
    auto output = [](Execution& ex, const std::string& name) -> size_t {
      for (size_t i = 0; i < ex.info().outputs.size(); ++i)
        if (ex.info().outputs[i].name == name) return i;
      ADD_FAILURE() << "no output " << name;
      return 0;
    };
    ASSERT_TRUE(pf.SetInput("input_ids", prompt.value().data.data(), prompt.value().data.size(), {1, t}).ok());
    std::vector<int64_t> ones(t + n, 1);
    ASSERT_TRUE(pf.SetInput("attention_mask", ones.data(), t * 8, {1, t}).ok());
    const std::vector<float> zeros(4 * 16, 0.f);
    for (const auto& p : pasts) ASSERT_TRUE(pf.SetInput(p, zeros.data(), zeros.size() * 4, {1, 4, 1, 16}).ok());
    ASSERT_TRUE(pf.Run().ok());
    Execution* last = &pf;
    std::vector<int64_t> tokens;
    std::vector<float> logits;
    for (int i = 0; i < n; ++i) {
      const size_t li = output(*last, "logits");
      const std::vector<int64_t>& ls = last->output_shape(li);
      ASSERT_EQ(ls.size(), 3u);
      const float* row = static_cast<const float*>(last->output_data(li)) + (ls[1] - 1) * vocab;
      logits.insert(logits.end(), row, row + vocab);
      tokens.push_back(std::max_element(row, row + vocab) - row);
      if (i + 1 == n) break;
      // The next step: this token, the presents as the past, a mask one longer.
      const int64_t past = t + i;
      ASSERT_TRUE(dc.SetInput("input_ids", &tokens.back(), 8, {1, 1}).ok());
      ASSERT_TRUE(dc.SetInput("attention_mask", ones.data(), (past + 1) * 8, {1, past + 1}).ok());
      for (const auto& p : pasts) {
        const size_t pi = output(*last, "present" + p.substr(std::string("past_key_values").size()));
        ASSERT_EQ(last->output_shape(pi), (std::vector<int64_t>{1, 4, past, 16}));
        // The present is read before this run overwrites it (decode feeding decode): copy it first.
        const std::vector<float> kv = Floats(last->output_data(pi), last->output_bytes(pi));
        Status s = dc.SetInput(p, kv.data(), kv.size() * 4, {1, 4, past, 16});
        ASSERT_TRUE(s.ok()) << s.message();
      }
      Status s = dc.Run();
      ASSERT_TRUE(s.ok()) << "step " << i + 1 << ": " << s.message();
      last = &dc;
    }
    EXPECT_EQ(tokens, want);
    EXPECT_LE(testing::Compare(logits, want_logits).rel_l2, 1e-4);
    ++generated;
  });
  EXPECT_GT(generated, 0);
}

}  // namespace
}  // namespace fcb
