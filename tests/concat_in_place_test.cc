// A Concat along the channels whose inputs are all conv outputs read by
// nothing else runs no step: the convs write their channels into its output
// (OpDef::write_channel_slice, compile/lower.cc). A Concat with an input that
// has another reader keeps its copy. Both are checked on every target, at 1
// and 2 threads, against a scalar NCHW reference computed here: the pointwise,
// dense 3x3 and depthwise convs that feed the first Concat, and the second
// Concat whose first input is also a graph output. And a stem conv that
// reads the model's NCHW input in place of a transpose step's output, and a
// ReduceMean over H and W that runs as the NHWC global pool.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>


#include "fcb/fcb.h"
#include "fcb/inspect.h"
#include "ops/names.h"
#include "per_target.h"
#include "test_util.h"

namespace fcb {
namespace {

using testing::TempDir;

constexpr int64_t kC = 8, kH = 9, kW = 10;

struct ConvSpec {
  std::string name;
  int64_t oc, k, group;
  std::vector<float> w, b;
};

void Value(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

void Floats(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
}

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void AddConv(onnx::GraphProto* g, const ConvSpec& c, const std::string& in) {
  const int64_t icg = kC / c.group;
  Floats(g, c.name + "_w", {c.oc, icg, c.k, c.k}, c.w);
  Floats(g, c.name + "_b", {c.oc}, c.b);
  auto* n = g->add_node();
  n->set_name(c.name);
  n->set_op_type("Conv");
  n->add_input(in);
  n->add_input(c.name + "_w");
  n->add_input(c.name + "_b");
  n->add_output(c.name);
  auto* pads = n->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(c.k / 2);
  IntAttr(n, "group", c.group);
}

// Plain NCHW conv, stride 1, "same" padding.
std::vector<float> RefConv(const std::vector<float>& x, const ConvSpec& c) {
  const int64_t icg = kC / c.group, ocg = c.oc / c.group, p = c.k / 2;
  std::vector<float> y(static_cast<size_t>(c.oc * kH * kW));
  for (int64_t o = 0; o < c.oc; ++o)
    for (int64_t yy = 0; yy < kH; ++yy)
      for (int64_t xx = 0; xx < kW; ++xx) {
        double s = c.b[o];
        for (int64_t i = 0; i < icg; ++i)
          for (int64_t ky = 0; ky < c.k; ++ky)
            for (int64_t kx = 0; kx < c.k; ++kx) {
              const int64_t iy = yy + ky - p, ix = xx + kx - p;
              if (iy < 0 || iy >= kH || ix < 0 || ix >= kW) continue;
              const int64_t ci = (o / ocg) * icg + i;
              s += double{x[(ci * kH + iy) * kW + ix]} * c.w[((o * icg + i) * c.k + ky) * c.k + kx];
            }
        y[(o * kH + yy) * kW + xx] = static_cast<float>(s);
      }
  return y;
}

// Writes m to `model` and compiles it for every target into `out`.
void WriteAndCompile(const onnx::ModelProto& m, const std::string& model, const std::string& out) {
  {
    std::ofstream f(model, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&f));
  }
  CompileSpec spec;
  spec.targets = {"all"};
  auto r = Compile(model, spec, out);
  ASSERT_TRUE(r.ok()) << r.status().message();
}

// Runs `fcb`'s main method on input x on every runnable target at 1 and 2
// threads and checks each output against want[its name].
void ExpectOutputsOnEveryTarget(const std::string& fcb, const std::vector<float>& x,
                                const std::map<std::string, std::vector<float>>& want) {
  testing::ForEachRunnableTarget(
      fcb, [&](const std::string& target, const std::shared_ptr<const Program>& program) {
        for (int threads : {1, 2}) {
          auto ex = Execution::Create(program, "main", threads);
          ASSERT_TRUE(ex.ok()) << ex.status().message();
          ASSERT_TRUE(ex.value()->SetInput("x", x.data(), x.size() * 4).ok());
          ASSERT_TRUE(ex.value()->Run().ok());
          const auto& outs = ex.value()->info().outputs;
          ASSERT_EQ(outs.size(), want.size());
          for (size_t o = 0; o < outs.size(); ++o) {
            ASSERT_TRUE(want.count(outs[o].name)) << outs[o].name;
            const std::vector<float>& w = want.at(outs[o].name);
            const float* p = static_cast<const float*>(ex.value()->output_data(static_cast<int>(o)));
            int bad = 0;
            for (size_t i = 0; i < w.size() && bad < 5; ++i)
              if (!(std::fabs(p[i] - w[i]) <= 1e-4f * (1 + std::fabs(w[i]))))
                ADD_FAILURE() << target << " " << outs[o].name << "[" << i << "] = " << p[i] << ", want " << w[i]
                              << ", threads " << threads,
                    ++bad;
          }
        }
      });
}

std::vector<float> Wave(int64_t n, float f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(f * static_cast<float>(i + 1)) * 0.5f;
  return v;
}

ConvSpec Spec(const std::string& name, int64_t oc, int64_t k, int64_t group, float f) {
  return {name, oc, k, group, Wave(oc * (kC / group) * k * k, f), Wave(oc, f + 0.3f)};
}

TEST(ConcatInPlace, ProducersWriteIntoTheOutputAndOtherReadersKeepTheCopy) {
  // cat1 = Concat(pointwise 8->6, 3x3 8->5, depthwise 3x3 8->8): no step.
  // cat2 = Concat(d: 1x1 8->3, also an output; e: 1x1 8->2): a Concat step.
  const std::vector<ConvSpec> first = {Spec("pw", 6, 1, 1, 0.7f), Spec("dense", 5, 3, 1, 1.3f),
                                       Spec("dw", 8, 3, 8, 0.9f)};
  const ConvSpec d = Spec("d", 3, 1, 1, 0.4f), e = Spec("e", 2, 1, 1, 1.1f);
  TempDir dir;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("concat_in_place");
  Value(g->add_input(), "x", {1, kC, kH, kW});
  for (const auto& c : first) AddConv(g, c, "x");
  AddConv(g, d, "x");
  AddConv(g, e, "x");
  auto concat = [&](const std::string& out, std::vector<std::string> in) {
    auto* n = g->add_node();
    n->set_name(out);
    n->set_op_type("Concat");
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    IntAttr(n, "axis", 1);
  };
  concat("cat1", {"pw", "dense", "dw"});
  concat("cat2", {"d", "e"});
  // A conv after each Concat keeps both in NHWC.
  const ConvSpec z = {"z", 4, 1, 1, Wave(4 * 19, 0.5f), Wave(4, 0.2f)};
  Floats(g, "z_w", {4, 19, 1, 1}, z.w);
  Floats(g, "z_b", {4}, z.b);
  auto* zn = g->add_node();
  zn->set_name("z");
  zn->set_op_type("Conv");
  for (const char* i : {"cat1", "z_w", "z_b"}) zn->add_input(i);
  zn->add_output("z");
  Value(g->add_output(), "z", {1, 4, kH, kW});
  Value(g->add_output(), "cat2", {1, 5, kH, kW});
  Value(g->add_output(), "d", {1, 3, kH, kW});
  const std::string out = dir.File("concat.fcb");
  ASSERT_NO_FATAL_FAILURE(WriteAndCompile(m, dir.File("concat.onnx"), out));

  int concats = 0;
  for (const auto& s : testing::PlanSteps(out))
    if (s.op == "Concat") {
      ++concats;
      EXPECT_EQ(s.node, "cat2");
    }
  EXPECT_EQ(concats, 1) << "cat1 runs in place, cat2 copies";

  const std::vector<float> x = Wave(kC * kH * kW, 0.37f);
  // The reference: cat1 in NCHW channel order, then z; cat2 and d.
  std::vector<float> cat1;
  for (const auto& c : first) {
    const auto y = RefConv(x, c);
    cat1.insert(cat1.end(), y.begin(), y.end());
  }
  std::vector<float> want_z(static_cast<size_t>(4 * kH * kW));
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t p = 0; p < kH * kW; ++p) {
      double s = z.b[o];
      for (int64_t i = 0; i < 19; ++i) s += double{cat1[i * kH * kW + p]} * z.w[o * 19 + i];
      want_z[o * kH * kW + p] = static_cast<float>(s);
    }
  const auto want_d = RefConv(x, d), want_e = RefConv(x, e);
  std::vector<float> want_cat2 = want_d;
  want_cat2.insert(want_cat2.end(), want_e.begin(), want_e.end());

  ExpectOutputsOnEveryTarget(out, x, {{"z", want_z}, {"cat2", want_cat2}, {"d", want_d}});
}

// A conv over the model's NCHW image input with few channels (a stem) reads
// that input itself: the lowering drops the NCHW -> NHWC transpose in front
// of it (compile/lower.cc FoldNchwTransposes, ConvNhwc input_nchw). Checked
// on every target at 1 and 2 threads against a scalar reference: a 3 -> 20
// stride-2 stem with ReLU, then a 1x1 conv; the only transpose left is the
// one back to NCHW for the output.
TEST(NchwStem, StemReadsTheNchwInputWithNoTransposeStep) {
  constexpr int64_t kIc = 3, kIh = 17, kIw = 23, kOc = 20, kOh = 9, kOw = 12, kOut = 6;
  TempDir dir;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("nchw_stem");
  Value(g->add_input(), "x", {1, kIc, kIh, kIw});
  const std::vector<float> w1 = Wave(kOc * kIc * 9, 0.61f), b1 = Wave(kOc, 0.23f);
  const std::vector<float> w2 = Wave(kOut * kOc, 0.47f), b2 = Wave(kOut, 0.19f);
  Floats(g, "w1", {kOc, kIc, 3, 3}, w1);
  Floats(g, "b1", {kOc}, b1);
  Floats(g, "w2", {kOut, kOc, 1, 1}, w2);
  Floats(g, "b2", {kOut}, b2);
  auto* stem = g->add_node();
  stem->set_name("stem");
  stem->set_op_type("Conv");
  for (const char* i : {"x", "w1", "b1"}) stem->add_input(i);
  stem->add_output("s");
  for (const char* name : {"pads", "strides"}) {
    auto* a = stem->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < (name[0] == 'p' ? 4 : 2); ++i) a->add_ints(name[0] == 'p' ? 1 : 2);
  }
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("s");
  relu->add_output("r");
  auto* pw = g->add_node();
  pw->set_name("pw");
  pw->set_op_type("Conv");
  for (const char* i : {"r", "w2", "b2"}) pw->add_input(i);
  pw->add_output("y");
  Value(g->add_output(), "y", {1, kOut, kOh, kOw});
  const std::string out = dir.File("stem.fcb");
  ASSERT_NO_FATAL_FAILURE(WriteAndCompile(m, dir.File("stem.onnx"), out));
  const auto steps = testing::PlanSteps(out);
  ASSERT_FALSE(steps.empty());
  EXPECT_EQ(steps.front().op, ops::opname::ConvNhwc) << "the stem comes first, reading x";
  int transposes = 0;
  for (const auto& s : steps) transposes += s.op == "Transpose";
  EXPECT_EQ(transposes, 1) << "only the output goes back to NCHW";

  const std::vector<float> x = Wave(kIc * kIh * kIw, 0.37f);
  std::vector<float> mid(static_cast<size_t>(kOc * kOh * kOw)), want(static_cast<size_t>(kOut * kOh * kOw));
  for (int64_t o = 0; o < kOc; ++o)
    for (int64_t yy = 0; yy < kOh; ++yy)
      for (int64_t xx = 0; xx < kOw; ++xx) {
        double s = b1[o];
        for (int64_t c = 0; c < kIc; ++c)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = yy * 2 + ky - 1, ix = xx * 2 + kx - 1;
              if (iy < 0 || iy >= kIh || ix < 0 || ix >= kIw) continue;
              s += double{x[(c * kIh + iy) * kIw + ix]} * w1[((o * kIc + c) * 3 + ky) * 3 + kx];
            }
        mid[(o * kOh + yy) * kOw + xx] = static_cast<float>(std::max(s, 0.0));
      }
  for (int64_t o = 0; o < kOut; ++o)
    for (int64_t p = 0; p < kOh * kOw; ++p) {
      double s = b2[o];
      for (int64_t c = 0; c < kOc; ++c) s += double{mid[c * kOh * kOw + p]} * w2[o * kOc + c];
      want[o * kOh * kOw + p] = static_cast<float>(s);
    }
  ExpectOutputsOnEveryTarget(out, x, {{"y", want}});
}

// ReduceMean over H and W of an NHWC value (x.mean([2, 3]) in torch) is the
// NHWC global average pool: no transpose of the feature map back to NCHW,
// with keepdims = 0 (a view of the pooled [n,1,1,c]) and 1, axes negative and
// positive, as an attribute (opset 13) and as an input (opset 18).
TEST(SpatialMean, ReduceMeanOverHwOfAnNhwcValueIsTheGlobalPool) {
  for (int opset : {13, 18}) {
    TempDir dir;
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
    auto* g = m.mutable_graph();
    g->set_name("spatial_mean");
    Value(g->add_input(), "x", {1, kC, kH, kW});
    const ConvSpec c = Spec("pw", 12, 1, 1, 0.53f);
    AddConv(g, c, "x");
    const std::vector<std::vector<int64_t>> axes = {{2, 3}, {-1, -2}};
    for (int k = 0; k < 2; ++k) {
      auto* n = g->add_node();
      n->set_name("mean" + std::to_string(k));
      n->set_op_type("ReduceMean");
      n->add_input("pw");
      n->add_output("m" + std::to_string(k));
      IntAttr(n, "keepdims", k);
      if (opset < 18) {
        auto* a = n->add_attribute();
        a->set_name("axes");
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : axes[k]) a->add_ints(v);
      } else {
        auto* t = g->add_initializer();
        t->set_name("axes" + std::to_string(k));
        t->set_data_type(onnx::TensorProto::INT64);
        t->add_dims(2);
        for (int64_t v : axes[k]) t->add_int64_data(v);
        n->add_input("axes" + std::to_string(k));
      }
    }
    Value(g->add_output(), "m0", {1, c.oc});
    Value(g->add_output(), "m1", {1, c.oc, 1, 1});
    const std::string out = dir.File("mean.fcb");
    ASSERT_NO_FATAL_FAILURE(WriteAndCompile(m, dir.File("mean.onnx"), out));
    int pools = 0, transposes = 0;
    for (const auto& s : testing::PlanSteps(out)) {
      EXPECT_NE(s.op, "ReduceMean") << "opset " << opset;
      pools += s.op == ops::opname::GlobalAvgPoolNhwc;
      transposes += s.op == "Transpose";
    }
    EXPECT_EQ(pools, 2) << "opset " << opset;
    EXPECT_LE(transposes, 2) << "the input's, and m1's 12 values back to NCHW; never the feature map";

    const std::vector<float> x = Wave(kC * kH * kW, 0.29f);
    const std::vector<float> y = RefConv(x, c);
    std::vector<float> mean(static_cast<size_t>(c.oc));
    for (int64_t o = 0; o < c.oc; ++o) {
      double s = 0;
      for (int64_t p = 0; p < kH * kW; ++p) s += y[o * kH * kW + p];
      mean[o] = static_cast<float>(s / (kH * kW));
    }
    ExpectOutputsOnEveryTarget(out, x, {{"m0", mean}, {"m1", mean}});
  }
}

// ONNX Resize over H and W of one [c][h][w] tensor, per the operator's
// definition, for the modes the test below uses: nearest (asymmetric with
// floor, half_pixel with round_prefer_floor) and linear (half_pixel,
// align_corners); indices beyond the border take the edge value.
std::vector<float> RefResize(const std::vector<float>& x, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow,
                             double sy, double sx, const std::string& mode, const std::string& coord) {
  // Per output coordinate: input indices and weights (two taps).
  const auto axis = [&](int64_t in, int64_t out, double scale) {
    std::vector<std::array<std::pair<int64_t, double>, 2>> t(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      double xo;
      if (coord == "asymmetric") xo = o / scale;
      else if (coord == "align_corners") xo = out == 1 ? 0 : o * double(in - 1) / double(out - 1);
      else xo = (o + 0.5) / scale - 0.5;
      const auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
      if (mode == "nearest") {
        const double f = std::floor(xo);
        const int64_t i = coord == "asymmetric" ? int64_t(f) : (xo - f > 0.5 ? int64_t(f) + 1 : int64_t(f));
        t[o] = {{{clamp(i), 1.0}, {0, 0.0}}};
      } else {
        const double f = std::floor(xo), r = xo - f;
        t[o] = {{{clamp(int64_t(f)), 1 - r}, {clamp(int64_t(f) + 1), r}}};
      }
    }
    return t;
  };
  const auto ty = axis(h, oh, sy), tx = axis(w, ow, sx);
  std::vector<float> y(static_cast<size_t>(c * oh * ow));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        double s = 0;
        for (const auto& [iy, wy] : ty[oy])
          for (const auto& [ix, wx] : tx[ox]) s += wy * wx * x[(ch * h + iy) * w + ix];
        y[(ch * oh + oy) * ow + ox] = static_cast<float>(s);
      }
  return y;
}

// A Resize over H and W between NHWC steps runs NHWC (ResizeNhwc): no
// transposes around it. Scales and sizes, up- and downsampling, nearest and
// linear in three coordinate modes, 12 channels (a partial vector); the
// values against RefResize on every target at 1 and 2 threads. With 4
// channels (under ResizeNhwc's minimum) the NCHW Resize stays.
TEST(ResizeNhwc, AResizeOfAnNhwcValueRunsNhwc) {
  struct Case {
    std::string mode, coord;
    bool sizes;
    int64_t oh, ow;  // with sizes; with scales, from sy and sx
    double sy, sx;
    int64_t channels;
  };
  const Case cases[] = {
      {"nearest", "asymmetric", false, 18, 30, 2.0, 3.0, 12},
      {"linear", "half_pixel", false, 13, 5, 1.5, 0.5, 12},
      {"linear", "align_corners", true, 13, 7, 13.0 / kH, 7.0 / kW, 12},
      {"nearest", "half_pixel", true, 5, 21, 5.0 / kH, 21.0 / kW, 12},
      {"linear", "half_pixel", false, 18, 20, 2.0, 2.0, 4},
  };
  for (const Case& k : cases) {
    const std::string what = k.mode + " " + k.coord + (k.sizes ? " sizes" : " scales") + " c" +
                             std::to_string(k.channels);
    TempDir dir;
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    auto* g = m.mutable_graph();
    g->set_name("resize_nhwc");
    Value(g->add_input(), "x", {1, kC, kH, kW});
    const ConvSpec c = Spec("pw", k.channels, 1, 1, 0.61f);
    AddConv(g, c, "x");
    auto* t = g->add_initializer();
    t->set_name("shape");
    if (k.sizes) {
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(4);
      for (int64_t v : {int64_t{1}, k.channels, k.oh, k.ow}) t->add_int64_data(v);
    } else {
      t->set_data_type(onnx::TensorProto::FLOAT);
      t->add_dims(4);
      for (double v : {1.0, 1.0, k.sy, k.sx}) t->add_float_data(static_cast<float>(v));
    }
    auto* r = g->add_node();
    r->set_name("resize");
    r->set_op_type("Resize");
    r->add_input("pw");
    r->add_input("");
    r->add_input(k.sizes ? "" : "shape");
    if (k.sizes) r->add_input("shape");
    r->add_output("up");
    for (const auto& [name, value] : std::map<std::string, std::string>{
             {"mode", k.mode}, {"coordinate_transformation_mode", k.coord}, {"nearest_mode", "round_prefer_floor"}}) {
      auto* a = r->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(k.coord == "asymmetric" && name == "nearest_mode" ? "floor" : value);
    }
    auto* relu = g->add_node();  // the Resize output is not itself a graph output
    relu->set_op_type("Relu");
    relu->add_input("up");
    relu->add_output("y");
    Value(g->add_output(), "y", {1, k.channels, k.oh, k.ow});
    const std::string out = dir.File("resize.fcb");
    ASSERT_NO_FATAL_FAILURE(WriteAndCompile(m, dir.File("resize.onnx"), out));
    int nhwc = 0, nchw = 0;
    for (const auto& s : testing::PlanSteps(out)) {
      nhwc += s.op == ops::opname::ResizeNhwc;
      nchw += s.op == "Resize";
    }
    const bool want_nhwc = k.channels >= 8;
    EXPECT_EQ(nhwc, want_nhwc ? 1 : 0) << what << " (the host target's plan)";
    EXPECT_EQ(nchw, want_nhwc ? 0 : 1) << what;

    const std::vector<float> x = Wave(kC * kH * kW, 0.37f);
    std::vector<float> y = RefResize(RefConv(x, c), k.channels, kH, kW, k.oh, k.ow, k.sy, k.sx, k.mode, k.coord);
    for (float& v : y) v = std::max(v, 0.f);
    ExpectOutputsOnEveryTarget(out, x, {{"y", y}});
  }
}

}  // namespace
}  // namespace fcb
