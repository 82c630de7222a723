// The runtime resolves a plan with ranges at each new combination of sizes
// incrementally from its check at the bound (ops::ResolvePlan: only the steps
// whose operands change are inferred again). This checks that it gives what
// the full checker gives at the same sizes (ops::CheckPlan with the input
// shapes: every tensor's shape, the values computed from shapes, the guards,
// the scratch) at every size of the test models' ranges: BERT at 1..512, the
// decoder's prefill at 1..64 and decode at past 1..1023, resnet18 on a grid
// of 64..512 by 64..512. Each size is also resolved over the resolution of
// the size before (its storage reused, as the runtime's cache does).
//
// The same sizes check the methods' symbolic shapes (ops::InferSymbolicPlan):
// every shape it works out evaluates to the resolution's, every relation it
// requires holds, BERT's and the decoder's reached tensors are all worked
// out, as are resnet18's (its convolutions and pools over a changing
// picture, their shapes proven at every size, the Winograd/direct guards
// evaluated from them), and some outputs read as expected
// ("1x4x(past_sequence_length+1)x16").
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>

#include "fcb/fcb.h"
#include "import/onnx_builder_test.h"
#include "ops/plan_check.h"
#include "ops/symbolic_plan.h"
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

// `methods` compiled with `spec` into `out`, loaded for the generic target.
Result<std::shared_ptr<const Program>> CompileForGeneric(const std::map<std::string, std::string>& methods,
                                                          const CompileSpec& spec, const std::string& out) {
  auto report = CompileMethods(methods, spec, out);
  if (!report.ok()) return report.TakeStatus();
  LoadOptions lo;
  lo.target = "generic";
  return Program::Load(out, lo);
}

// What a test checks of a method's symbolic plan beyond its agreeing with
// every resolution: how many of the reached tensors' shapes it must know,
// and the shapes of some outputs (by name) as SymShapeText writes them.
struct SymbolicExpectations {
  double min_known_fraction = 0;
  std::map<std::string, std::string> outputs;
  // Its resolutions take the values computed from the shapes from the
  // loader's compiled program (CheckedPlan::value_program), not only by
  // evaluating the steps: the full check then compares those values.
  bool values_compiled = false;
  // Ops none of whose steps is computed from the shapes (a causal mask over
  // the past, which no shape depends on, is made by its kernels).
  std::vector<std::string> made_by_kernels;
  // At every size, every step of a window op (OpDef::window_shape: the
  // convolutions and pools) has its shapes proven, guarded ones included.
  bool windows_proven = false;
};

// Compiles `methods` with `spec` for the generic target and, for each
// method and each list of symbol values `sizes` gives, compares the
// incremental resolution with the full check, and the method's symbolic
// plan (ops::InferSymbolicPlan) with the resolution.
void ExpectResolutionsMatchFullChecks(const std::map<std::string, std::string>& methods, const CompileSpec& spec,
                                      const SizesFn& sizes_of,
                                      const std::map<std::string, SymbolicExpectations>& symbolic = {}) {
  TempDir tmp;
  auto program = CompileForGeneric(methods, spec, tmp.File("model.fcb"));
  ASSERT_TRUE(program.ok()) << program.status().message();
  const ProgramImpl& p = ProgramAccess::Of(*program.value());
  Weights weights(*p.file);
  int compared = 0;
  for (const PreparedMethod& m : p.methods) {
    ASSERT_TRUE(m.dynamic() && m.bound_plan) << m.info.name;
    const format::ContextDesc& c = *m.context;
    const ops::SymbolicPlan sym = ops::InferSymbolicPlan(c, *m.bound_plan);
    ASSERT_GT(sym.reached, 0u) << m.info.name;
    std::printf("%s: symbolic shapes of %zu of the %zu tensors a change of size reaches, %zu required equalities\n",
                m.info.name.c_str(), sym.known, sym.reached, sym.requires_equal.size());
    if (auto e = symbolic.find(m.info.name); e != symbolic.end()) {
      for (const std::string& op : e->second.made_by_kernels) {
        int steps = 0;
        for (size_t si = 0; si < c.steps.size(); ++si)
          if (c.steps[si].op == op) {
            ++steps;
            EXPECT_FALSE(m.bound_plan->computed_steps[si]) << c.steps[si].node;
          }
        EXPECT_GT(steps, 0) << op;
      }
      EXPECT_GE(static_cast<double>(sym.known), e->second.min_known_fraction * static_cast<double>(sym.reached))
          << m.info.name;
      for (const auto& [name, text] : e->second.outputs) {
        bool found = false;
        for (int32_t t : c.outputs)
          if (c.tensors[t].name == name) {
            found = true;
            ASSERT_TRUE(sym.shapes[t].has_value()) << name;
            EXPECT_EQ(ops::SymShapeText(*sym.shapes[t], sym.symbols), text) << name;
          }
        EXPECT_TRUE(found) << name;
      }
    }
    // One resolution resolved over again at every size, as an execution's
    // cache does with its least recently used entry: the same as a new one.
    ops::ResolvedPlan reused;
    ShapeValues patched_reused;  // FillResolved into the same storage at every size
    uint64_t values_compiled = 0, values_passed_by = 0, shapes_proven = 0, fallbacks = 0;
    for (const auto& values : sizes_of(c)) {
      ASSERT_EQ(values.size(), c.symbols.size());
      const std::vector<ir::Shape> shapes = m.InputShapesAt(values);
      std::string sizes;
      for (size_t k = 0; k < values.size(); ++k) sizes += c.symbols[k].name + "=" + std::to_string(values[k]) + " ";
      SCOPED_TRACE("method " + m.info.name + " at " + sizes);
      auto full = ops::CheckPlan(c, weights, &shapes);
      ASSERT_TRUE(full.ok()) << full.status().message();
      ops::ResolvedPlan r;
      Status s = ops::ResolvePlan(c, *m.bound_plan, shapes, &r);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(ops::ResolutionDifference(c, full.value(), r), "");
      EXPECT_EQ(ops::SymbolicDifference(c, sym, values, r), "");
      // What a run copies or skips at these sizes: patched from the bound's
      // over the steps reached (as the runtime does), the same as made from
      // every step.
      ShapeValues every, patched;
      every.Fill(c, *m.bound_plan, r);
      patched.FillResolved(m.shape_values, *m.bound_plan, r);
      EXPECT_TRUE(every.actions == patched.actions) << "ShapeValues::FillResolved: another action";
      EXPECT_TRUE(every.values == patched.values) << "ShapeValues::FillResolved: another value";
      values_compiled += r.values_compiled;
      shapes_proven += r.shapes_proven;
      if (auto e = symbolic.find(m.info.name); e != symbolic.end() && e->second.windows_proven) {
        const auto& proven = m.bound_plan->proven_step_index;
        for (size_t si = 0; si < c.steps.size(); ++si)
          if (ops::FindOp(c.steps[si].op)->window_shape)
            EXPECT_TRUE(r.proven_written && std::find(proven.begin(), proven.end(), si) != proven.end())
                << m.bound_plan->steps[si].where << " is not proven";
      }
      // A walked step's shape that a proven step was worked out from and
      // that differs from the symbolic plan's (here: the check made to
      // expect another value) makes the resolution walk every step: the
      // same result, nothing proven.
      const ops::CheckedPlan& b0 = *m.bound_plan;
      std::vector<int64_t> slots(b0.value_program.num_slots());
      // A slot with another value at these sizes (at some sizes every slot holds one value).
      // (The first sizes, and the upper bounds: there each walked shape is the
      // bound's, so nothing but putting back what the proving resolution
      // before wrote makes them right.)
      bool at_hi = true;
      for (size_t k = 0; k < values.size(); ++k) at_hi = at_hi && values[k] == c.symbols[k].hi;
      const bool evaluated = !b0.verify_slot.empty() && (fallbacks < 3 || at_hi) &&
                             b0.value_program.Evaluate(values, slots).ok();
      const int64_t expected = evaluated ? slots[static_cast<size_t>(b0.verify_slot[0])] : 0;
      const auto other = evaluated ? std::find_if(slots.begin(), slots.end(), [&](int64_t v) { return v != expected; })
                                   : slots.end();
      if (other != slots.end()) {
        ops::CheckedPlan wrong = b0;
        wrong.verify_slot[0] = static_cast<int32_t>(other - slots.begin());
        // (and the proven dims it writes before it walks, which the walk
        // must then put right, made wrong too)
        for (int32_t& slot : wrong.proven_dim_slot) slot = wrong.verify_slot[0];
        ops::ResolvedPlan fallback;
        s = ops::ResolvePlan(c, wrong, shapes, &fallback);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(ops::ResolutionDifference(c, full.value(), fallback), "") << "walking every step";
        EXPECT_EQ(fallback.shapes_proven, 0u);
        // The same walk over a resolution that proved its shapes (at the
        // sizes before), and (below) a proving one over it: every shape put
        // back or written again.
        s = ops::ResolvePlan(c, wrong, shapes, &reused);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(ops::ResolutionDifference(c, full.value(), reused), "") << "walking every step over a resolution";
        EXPECT_EQ(reused.shapes_proven, 0u);
        ShapeValues walked;
        walked.Fill(c, *m.bound_plan, reused);
        patched_reused.FillResolved(m.shape_values, *m.bound_plan, reused);
        EXPECT_TRUE(walked.actions == patched_reused.actions) << "FillResolved over an earlier one: another action";
        EXPECT_TRUE(walked.values == patched_reused.values) << "FillResolved over an earlier one: another value";
        ++fallbacks;
      }
      // A value passed by (ResolvedPlan::kUnread: only other program steps
      // read it, or steps not walked at an input whose contents their kernels
      // never read) is never one whose contents a step run reads, nor one the
      // method returns, nor one a step walked or evaluated reads.
      const ops::CheckedPlan& bound = *m.bound_plan;
      for (size_t t = 0; t < c.tensors.size(); ++t) {
        if (r.value_slot[t] != ops::ResolvedPlan::kUnread) continue;
        ++values_passed_by;
        EXPECT_TRUE(std::find(c.outputs.begin(), c.outputs.end(), static_cast<int32_t>(t)) == c.outputs.end())
            << "tensor '" << c.tensors[t].name << "' is returned but was passed by";
        for (size_t si = 0; si < c.steps.size(); ++si) {
          if (bound.computed_steps[si]) continue;
          for (size_t j = 0; j < c.steps[si].inputs.size(); ++j)
            EXPECT_TRUE(c.steps[si].inputs[j] != static_cast<int32_t>(t) ||
                        !ops::ReadsInputContents(*bound.steps[si].def, j))
                << "tensor '" << c.tensors[t].name << "' is read by " << bound.steps[si].where << " but was passed by";
        }
      }
      std::vector<bool> walked(bound.reach_steps.size(), !r.proven_written);
      for (int32_t k : bound.reach_walk) walked[static_cast<size_t>(k)] = true;
      for (size_t k = 0; k < bound.reach_steps.size(); ++k) {
        if ((k < bound.reach_value_at.size() && bound.reach_value_at[k] >= 0) || !walked[k]) continue;
        for (int32_t j = bound.reach_offsets[k]; j < bound.reach_offsets[k + 1]; ++j) {
          const int32_t t = bound.reach_inputs[j];
          EXPECT_TRUE(t < 0 || r.value_slot[t] != ops::ResolvedPlan::kUnread)
              << "step " << bound.reach_steps[k] << " reads '" << c.tensors[t].name << "', which was passed by";
        }
      }
      s = ops::ResolvePlan(c, *m.bound_plan, shapes, &reused);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(ops::ResolutionDifference(c, full.value(), reused), "") << "resolved over an earlier resolution";
      ShapeValues every_reused;
      every_reused.Fill(c, *m.bound_plan, reused);
      patched_reused.FillResolved(m.shape_values, *m.bound_plan, reused);
      EXPECT_TRUE(every_reused.actions == patched_reused.actions) << "FillResolved over an earlier one: another action";
      EXPECT_TRUE(every_reused.values == patched_reused.values) << "FillResolved over an earlier one: another value";
      ++compared;
    }
    std::printf("%s: %llu values taken from the compiled program over all sizes, %llu passed by, %llu steps' "
                "shapes proven, %llu resolutions walking every step for a walked shape made to differ\n",
                m.info.name.c_str(), static_cast<unsigned long long>(values_compiled),
                static_cast<unsigned long long>(values_passed_by), static_cast<unsigned long long>(shapes_proven),
                static_cast<unsigned long long>(fallbacks));
    if (auto e = symbolic.find(m.info.name); e != symbolic.end() && e->second.values_compiled) {
      EXPECT_GT(values_compiled, 0u) << m.info.name;
      EXPECT_GT(values_passed_by, 0u) << m.info.name;  // the Shape -> Gather -> Concat links
      EXPECT_GT(shapes_proven, 0u) << m.info.name;     // the encoder's and the decoder's steps, proven
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
  ExpectResolutionsMatchFullChecks({{"main", model}}, spec, Together,
                                   {{"main", {1.0, {{"last_hidden_state", "1xseqx128"}}, true}}});
}

// The decoder's two methods: prefill (prompt 1..64, no past) and decode
// (past 1..1023, a mask one longer).
CompileSpec DecoderSpec() {
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
  return spec;
}

TEST(ResolvePlan, DecoderAtEveryPromptAndPastLengthMatchesTheFullCheck) {
  const std::string model = TestDataDir() + "/decoder_merged.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  const CompileSpec spec = DecoderSpec();
  ExpectResolutionsMatchFullChecks(
      {{"prefill", model}, {"decode", model}}, spec, Together,
      {{"prefill", {1.0, {{"logits", "1xsequence_lengthx256"}, {"present.1.value", "1x4xsequence_lengthx16"}}, true}},
       {"decode",
        {1.0, {{"logits", "1x1x256"}, {"present.0.key", "1x4x(past_sequence_length+1)x16"}}, true, {"LessOrEqual"}}}});
}

// The relations a symbolic plan requires are required: on a grid of sizes
// where the decoder's symbols move apart (a mask longer or shorter than the
// past and the prompt), every combination at which a relation fails is one
// the full check refuses, and at every combination the full check accepts
// the symbolic shapes agree with the resolution. (Execution::Run refuses
// sizes that break a relation before resolving; this is what makes that
// refusal never wrong.)
TEST(ResolvePlan, DecoderSymbolicRelationsFailOnlyWhereThePlanRefuses) {
  const std::string model = TestDataDir() + "/decoder_merged.onnx";
  ASSERT_TRUE(testing::FileExists(model)) << model << " is missing: run scripts/prepare_testdata.sh";
  TempDir tmp;
  auto program = CompileForGeneric({{"prefill", model}, {"decode", model}}, DecoderSpec(), tmp.File("model.fcb"));
  ASSERT_TRUE(program.ok()) << program.status().message();
  const ProgramImpl& p = ProgramAccess::Of(*program.value());
  Weights weights(*p.file);
  int broken = 0, accepted = 0;
  for (const PreparedMethod& m : p.methods) {
    const format::ContextDesc& c = *m.context;
    const ops::SymbolicPlan sym = ops::InferSymbolicPlan(c, *m.bound_plan);
    EXPECT_EQ(sym.requires_equal.size(), m.requirements.size()) << "the loader keeps them";
    ASSERT_EQ(c.symbols.size(), 2u) << m.info.name;
    // About 14 sizes per symbol, from lo to hi, with lo + 1 (next to a
    // length one apart from the other symbol's).
    auto grid = [](const format::ContextDesc::Symbol& sym) {
      std::vector<int64_t> v = {sym.lo};
      if (sym.lo < sym.hi) v.push_back(sym.lo + 1);
      for (int64_t x = sym.lo + 2; x < sym.hi; x += std::max<int64_t>(1, (sym.hi - sym.lo) / 12)) v.push_back(x);
      if (v.back() != sym.hi) v.push_back(sym.hi);
      return v;
    };
    for (int64_t a : grid(c.symbols[0]))
      for (int64_t b : grid(c.symbols[1])) {
        const std::vector<int64_t> values = {a, b};
        const std::vector<ir::Shape> shapes = m.InputShapesAt(values);
        SCOPED_TRACE(m.info.name + " at " + c.symbols[0].name + "=" + std::to_string(a) + ", " + c.symbols[1].name +
                     "=" + std::to_string(b));
        bool holds = true;
        for (const auto& [x, y] : sym.requires_equal) {
          auto u = x.Evaluate(values), v = y.Evaluate(values);
          holds = holds && u.ok() && v.ok() && u.value() == v.value();
        }
        auto full = ops::CheckPlan(c, weights, &shapes);
        if (!holds) {
          EXPECT_FALSE(full.ok()) << "a relation fails where the plan resolves";
          ++broken;
        }
        if (!full.ok()) continue;
        ++accepted;
        ops::ResolvedPlan r;
        ASSERT_TRUE(ops::ResolvePlan(c, *m.bound_plan, shapes, &r).ok());
        EXPECT_EQ(ops::SymbolicDifference(c, sym, values, r), "");
      }
  }
  EXPECT_GT(broken, 0);
  EXPECT_GT(accepted, 0);
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
  }, {{"main", SymbolicExpectations{1.0, {{"output", "1x1000"}}, false, {}, true}}});
}

// A value computed from the shapes that is larger than kMaxShapeValueBytes
// but that an output's shape depends on stays computed at every size (here
// a Range over the sequence that a NonZero reads, whose output's size
// depends on its operand's contents; a kernel may only make it from a
// constant operand), while a value as large that no shape depends on (the
// same positions as floats, added to the input) is made by its kernel at each
// run, though an op whose shape rules are not listed (ValueShapedInputs:
// ReduceSum) reads what it is added to.
TEST(ResolvePlan, LargeValuesFromTheShapesStayComputedWhereAShapeDependsOnThem) {
  TempDir tmp;
  onnx::ModelProto m = testing::MakeModel(13);
  testing::AddInput(m, "x", {1, "seq"});
  testing::AddInit(m, testing::Int64Tensor("zero", {}, {0}, false));
  testing::AddInit(m, testing::Int64Tensor("one", {}, {1}, false));
  testing::AddNode(m, "Shape", {"x"}, {"shape"});
  testing::AddNode(m, "Gather", {"shape", "one"}, {"len"});
  testing::AddNode(m, "Range", {"zero", "len", "one"}, {"positions"});  // [seq] int64: 1600 bytes at the bound
  testing::AddNode(m, "NonZero", {"positions"}, {"nonzero"});           // [1, seq-1]: its size is data-dependent
  testing::AttrInt(testing::AddNode(m, "Cast", {"nonzero"}, {"found"}), "to", onnx::TensorProto::FLOAT);
  testing::AttrInt(testing::AddNode(m, "Cast", {"positions"}, {"positions_f"}), "to", onnx::TensorProto::FLOAT);
  testing::AddNode(m, "Add", {"x", "positions_f"}, {"shifted"});  // a value no shape depends on
  testing::AddNode(m, "ReduceSum", {"shifted"}, {"summed"});
  for (const char* name : {"found", "shifted", "summed"}) testing::AddOutput(m, name);
  const std::string model = tmp.File("range_nonzero.onnx");
  {
    std::ofstream f(model, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  CompileSpec spec;
  spec.targets = {"generic"};
  spec.input_shapes["main:x"] = {1, {1, 200}};
  ExpectResolutionsMatchFullChecks({{"main", model}}, spec, Together);

  auto program = CompileForGeneric({{"main", model}}, spec, tmp.File("range_nonzero.fcb"));
  ASSERT_TRUE(program.ok()) << program.status().message();
  const PreparedMethod& pm = ProgramAccess::Of(*program.value()).methods.at(0);
  const format::ContextDesc& c = *pm.context;
  int range_step = -1, positions_f_step = -1;
  for (size_t si = 0; si < c.steps.size(); ++si) {
    if (c.steps[si].op == "Range") range_step = static_cast<int>(si);
    if (c.steps[si].op == "Cast" && c.tensors[c.steps[si].outputs[0]].name == "positions_f")
      positions_f_step = static_cast<int>(si);
  }
  ASSERT_GE(range_step, 0);
  EXPECT_TRUE(pm.bound_plan->computed_steps[range_step]) << "a NonZero's size depends on the Range";
  ASSERT_GE(positions_f_step, 0);
  EXPECT_FALSE(pm.bound_plan->computed_steps[positions_f_step]) << "no shape depends on the float positions";
  auto ex = Execution::Create(program.value(), "main", 1);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  for (int64_t seq : {200, 1, 7, 137, 200, 64}) {
    SCOPED_TRACE("seq " + std::to_string(seq));
    std::vector<float> in(static_cast<size_t>(seq));
    for (int64_t i = 0; i < seq; ++i) in[i] = 0.25f * static_cast<float>(i % 5);
    ASSERT_TRUE(ex.value()->SetInput("x", in.data(), in.size() * 4, {1, seq}).ok());
    const Status st = ex.value()->Run();
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(ex.value()->output_shape(0), (std::vector<int64_t>{1, seq - 1}));
    ASSERT_EQ(ex.value()->output_shape(1), (std::vector<int64_t>{1, seq}));
    const float* found = static_cast<const float*>(ex.value()->output_data(0));
    const float* shifted = static_cast<const float*>(ex.value()->output_data(1));
    for (int64_t i = 0; i + 1 < seq; ++i) ASSERT_EQ(found[i], static_cast<float>(i + 1)) << i;
    double sum = 0;
    for (int64_t i = 0; i < seq; ++i) {
      ASSERT_EQ(shifted[i], in[i] + static_cast<float>(i)) << i;
      sum += double{shifted[i]};
    }
    ASSERT_EQ(ex.value()->output_shape(2), (std::vector<int64_t>{1, 1}));
    EXPECT_NEAR(*static_cast<const float*>(ex.value()->output_data(2)), sum, 1e-3 * (1 + sum));
  }
}

// A conv and a max pool with auto_pad SAME (UPPER, LOWER) at `stride`, over
// an input [n, 3, h, w] whose dims are symbols, written to `path`.
void WriteSamePaddedModel(const std::string& path, int64_t stride) {
  onnx::ModelProto m = testing::MakeModel(13);
  testing::AddInput(m, "x", {"n", 3, "h", "w"});
  std::vector<float> w(8 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.125f * static_cast<float>(static_cast<int>(i % 11) - 5);
  testing::AddInit(m, testing::FloatTensor("w", {8, 3, 3, 3}, w));
  auto window = [&](const std::string& op, std::vector<std::string> in, const std::string& out, int64_t k,
                    const char* auto_pad) {
    onnx::NodeProto* n = testing::AddNode(m, op, in, {out});
    n->set_name(out == "c" ? "conv" : "pool");
    testing::AttrInts(n, "kernel_shape", {k, k});
    testing::AttrInts(n, "strides", {stride, stride});
    auto* pad = n->add_attribute();
    pad->set_name("auto_pad");
    pad->set_type(onnx::AttributeProto::STRING);
    pad->set_s(auto_pad);
  };
  window("Conv", {"x", "w"}, "c", 3, "SAME_UPPER");
  window("MaxPool", {"c"}, "y", 2, "SAME_LOWER");
  testing::AddOutput(m, "y");
  std::ofstream f(path, std::ios::binary);
  ASSERT_TRUE(m.SerializeToOstream(&f));
}

// Runs `program`'s method at input shape `shape` (values from the index):
// the output's shape and values.
std::pair<std::vector<int64_t>, std::vector<float>> RunAt(const std::shared_ptr<const Program>& program,
                                                          const std::vector<int64_t>& shape) {
  auto ex = Execution::Create(program, "main", 1);
  EXPECT_TRUE(ex.ok()) << ex.status().message();
  if (!ex.ok()) return {};
  std::vector<float> in(static_cast<size_t>(ir::NumElements(shape)));
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.01f * static_cast<float>(static_cast<int>(i * 7 % 23) - 11);
  EXPECT_TRUE(ex.value()->SetInput("x", in.data(), in.size() * 4, shape).ok());
  const Status st = ex.value()->Run();
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) return {};
  const std::vector<int64_t> out_shape = ex.value()->output_shape(0);
  const auto* y = static_cast<const float*>(ex.value()->output_data(0));
  return {out_shape, std::vector<float>(y, y + ir::NumElements(out_shape))};
}

// auto_pad SAME pads by the input's size: with a stride above 1 along a dim
// chosen at each run the padding changes with the size, which compiled
// windows (fixed pads) cannot follow: refused, naming the node and the fix.
// With a unit stride (the padding the same at every size) or a stride
// above 1 along dims that are fixed (a batch range), it compiles, and every
// size gives what a file compiled for exactly that size gives.
TEST(ResolvePlan, SamePaddingThatChangesWithTheSizeIsRefused) {
  TempDir tmp;
  const std::string strided = tmp.File("same_s2.onnx"), unit = tmp.File("same_s1.onnx");
  WriteSamePaddedModel(strided, 2);
  WriteSamePaddedModel(unit, 1);
  CompileSpec spec;
  spec.targets = {"generic"};
  spec.input_shapes["main:x"] = {1, 3, {8, 40}, {8, 40}};
  auto refused = CompileMethods({{"main", strided}}, spec, tmp.File("refused.fcb"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("node 'conv' (Conv): auto_pad SAME_UPPER with stride 2 pads its input "
                                            "'x' by its size along dim 2, which is chosen at each run (8..40 here)"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("fix that dimension with --input-shape"), std::string::npos);
  EXPECT_FALSE(testing::FileExists(tmp.File("refused.fcb")));

  struct Accepted {
    std::string model;
    std::vector<InputDim> dims;
    std::vector<std::vector<int64_t>> sizes;
  };
  const std::vector<Accepted> accepted = {
      {unit, {1, 3, {8, 40}, {8, 40}}, {{1, 3, 8, 8}, {1, 3, 13, 40}, {1, 3, 40, 21}, {1, 3, 9, 9}}},
      {strided, {{1, 3}, 3, 17, 18}, {{2, 3, 17, 18}, {1, 3, 17, 18}, {3, 3, 17, 18}}},
  };
  for (const Accepted& a : accepted) {
    spec.input_shapes["main:x"] = a.dims;
    auto ranged = CompileForGeneric({{"main", a.model}}, spec, tmp.File("ranged.fcb"));
    ASSERT_TRUE(ranged.ok()) << ranged.status().message();
    for (const auto& size : a.sizes) {
      SCOPED_TRACE(a.model + " at " + ir::ShapeToString(size));
      CompileSpec exact = spec;
      exact.input_shapes["main:x"] = {size[0], size[1], size[2], size[3]};
      auto fixed = CompileForGeneric({{"main", a.model}}, exact, tmp.File("exact.fcb"));
      ASSERT_TRUE(fixed.ok()) << fixed.status().message();
      const auto got = RunAt(ranged.value(), size), want = RunAt(fixed.value(), size);
      ASSERT_EQ(got.first, want.first);
      ASSERT_EQ(got.second.size(), want.second.size());
      for (size_t i = 0; i < got.second.size(); ++i) ASSERT_NEAR(got.second[i], want.second[i], 1e-5) << i;
    }
  }
}

}  // namespace
}  // namespace fcb
