#include "ir/symbolic.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace fcb::ir {

// How the test framework prints them.
void PrintTo(const DimExpr& e, std::ostream* os) { *os << e.ToString(); }
void PrintTo(const DimRange& r, std::ostream* os) { *os << "[" << r.lo << ", " << r.hi << "]"; }

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

struct Syms {
  SymbolTable table;
  DimExpr a, b, c;
  Syms() {
    a = table.Expr(table.Add("a", 1, 16).value());
    b = table.Expr(table.Add("b", -5, 7).value());
    c = table.Expr(table.Add("c", 0, 3).value());
  }
};

int64_t Eval(const DimExpr& e, std::vector<int64_t> v) {
  Result<int64_t> r = e.Evaluate(v);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : 0;
}

// ---------------------------------------------------------------------------
// Canonical form

TEST(Symbolic, ConstantsStayConstants) {
  DimExpr x = DimExpr(3) + 4;
  ASSERT_TRUE(x.IsConstant());
  EXPECT_EQ(x.constant_value(), 7);
  EXPECT_EQ(DimExpr(6) * 7, DimExpr(42));
  EXPECT_EQ(FloorDiv(DimExpr(-7), 2), DimExpr(-4));
  EXPECT_EQ(CeilDiv(DimExpr(-7), 2), DimExpr(-3));
  EXPECT_EQ(CeilDiv(DimExpr(7), 2), DimExpr(4));
  EXPECT_EQ(Mod(DimExpr(-7), 3), DimExpr(2));
  EXPECT_EQ(Mod(DimExpr(7), -3), DimExpr(-2));
  EXPECT_EQ(Min(DimExpr(3), 5), DimExpr(3));
  EXPECT_EQ(Max(DimExpr(3), 5), DimExpr(5));
  EXPECT_EQ(x.ToString(), "7");
  EXPECT_EQ(DimExpr(-2).ToString(), "-2");
}

TEST(Symbolic, LikeTermsCombineInAnyOrder) {
  Syms s;
  EXPECT_EQ(s.a + 1, 1 + s.a);
  EXPECT_EQ((s.a + s.b) + s.c, s.c + (s.b + s.a));
  EXPECT_EQ(s.a * 2, 2 * s.a);
  EXPECT_EQ(s.a + s.a, 2 * s.a);
  EXPECT_EQ(s.a + 0, s.a);
  EXPECT_EQ(s.a * 1, s.a);
  EXPECT_EQ(s.a * 0, DimExpr(0));
  EXPECT_TRUE((s.a - s.a).IsConstant());
  EXPECT_EQ(s.a * s.b, s.b * s.a);
  EXPECT_EQ((s.a + s.b) * (s.a - s.b), s.a * s.a - s.b * s.b);
  EXPECT_EQ((s.a + 1) * 3 - 3, 3 * s.a);
  EXPECT_EQ(-(-s.a), s.a);
  EXPECT_EQ((s.a + s.b).Hash(), (s.b + s.a).Hash());
  EXPECT_NE(s.a + 1, s.a + 2);
  EXPECT_NE(s.a, s.b);
  EXPECT_NE(s.a * s.b, s.a + s.b);
}

TEST(Symbolic, FloorDivRules) {
  Syms s;
  const DimExpr& h = s.a;
  EXPECT_EQ(FloorDiv(h, 1), h);
  EXPECT_EQ(FloorDiv(2 * h, 2), h);
  EXPECT_EQ(FloorDiv(2 * h + 3, 2), h + 1);
  EXPECT_EQ(FloorDiv(6 * h + 4 * s.b, 2), 3 * h + 2 * s.b);
  EXPECT_EQ(FloorDiv(3 * h + 1, 2), h + FloorDiv(h + 1, 2));
  EXPECT_EQ(FloorDiv(2 * h + 2, 4), FloorDiv(h + 1, 2));  // common factor
  EXPECT_EQ(FloorDiv(FloorDiv(h - 1, 2), 2), FloorDiv(h - 1, 4));  // nested floors
  EXPECT_EQ(FloorDiv(FloorDiv(h, 2) + 1, 3), FloorDiv(h + 2, 6));
  EXPECT_EQ(FloorDiv(h, -2), FloorDiv(-h, 2));
  EXPECT_EQ(CeilDiv(h, 2), FloorDiv(h + 1, 2));
  EXPECT_EQ(CeilDiv(2 * h, 2), h);
  EXPECT_FALSE(FloorDiv(h, s.b).IsConstant());
  EXPECT_FALSE(FloorDiv(h, 0).IsConstant());  // kept: evaluating it is an error
  // The conv output-size formula with pad 1, kernel 3, stride 2, applied twice.
  DimExpr out = h;
  for (int i = 0; i < 2; ++i) out = FloorDiv(out + 2 * 1 - 3, 2) + 1;
  for (int64_t v = 1; v <= 16; ++v) {
    int64_t want = v;
    for (int i = 0; i < 2; ++i) want = (want - 1 >= 0 ? (want - 1) / 2 : -1) + 1;  // want >= 0 here
    EXPECT_EQ(Eval(out, {v, 0, 0}), want) << v;
  }
  EXPECT_EQ(out, FloorDiv(h + 3, 4));  // floor((floor((h-1)/2)+1-1)/2)+1 = floor((h-1)/4)+1
}

TEST(Symbolic, ExactDivisionByExpressions) {
  Syms s;
  EXPECT_EQ(FloorDiv(768 * s.a, s.a), DimExpr(768));
  EXPECT_EQ(FloorDiv(s.a * s.b * 768, s.b * s.a), DimExpr(768));
  EXPECT_EQ(FloorDiv(s.a * s.b * 768, 2 * s.a), 384 * s.b);
  EXPECT_EQ(FloorDiv(768 * (s.a + s.b), s.a + s.b), DimExpr(768));
  EXPECT_EQ(FloorDiv(12 * s.c * (s.a + 1), 12 * s.c), s.a + 1);
  EXPECT_EQ(FloorDiv((s.a + s.b) * (s.a - s.b), s.a - s.b), s.a + s.b);
  EXPECT_EQ(Mod(768 * (s.a + s.b), s.a + s.b), DimExpr(0));
  EXPECT_EQ(Mod(s.a * s.b, s.b), DimExpr(0));
  // Not exact: kept.
  EXPECT_FALSE(FloorDiv(s.a + 1, s.a).IsConstant());
  EXPECT_FALSE(FloorDiv(3 * s.a, 2 * s.a).IsConstant());
  EXPECT_FALSE(FloorDiv(s.a * s.a + s.b, s.a).IsConstant());
  EXPECT_FALSE(Mod(s.a * s.a + 1, s.a).IsConstant());
}

TEST(Symbolic, ModRules) {
  Syms s;
  EXPECT_EQ(Mod(2 * s.a + 5, 2), DimExpr(1));
  EXPECT_EQ(Mod(3 * s.a + 5, 2), Mod(s.a + 1, 2));
  EXPECT_EQ(Mod(s.a, 1), DimExpr(0));
  EXPECT_EQ(Mod(s.a, -3), -Mod(-s.a, 3));
  EXPECT_FALSE(Mod(s.a, s.c).IsConstant());
}

TEST(Symbolic, MinMaxRules) {
  Syms s;
  EXPECT_EQ(Min(s.a, s.a + 1), s.a);
  EXPECT_EQ(Max(s.a, s.a + 1), s.a + 1);
  EXPECT_EQ(Min(s.a, s.a), s.a);
  EXPECT_EQ(Min(s.a, s.b), Min(s.b, s.a));
  EXPECT_EQ(Max(s.a + s.c, s.b), Max(s.b, s.c + s.a));
  EXPECT_NE(Min(s.a, s.b), Max(s.a, s.b));
}

TEST(Symbolic, ToString) {
  SymbolTable t;
  DimExpr past = t.Expr(t.Add("past", 1, 1023).value());
  DimExpr seq = t.Expr(t.Add("seq", 1, 512).value());
  DimExpr h = t.Expr(t.Add("H", 64, 512).value());
  DimExpr odd = t.Expr(t.Add("batch size\"x", 1, 4).value());
  EXPECT_EQ((past + 1).ToString(&t), "past+1");
  EXPECT_EQ((2 * seq).ToString(&t), "2*seq");
  EXPECT_EQ(FloorDiv(h + 1, 2).ToString(&t), "floor((H+1)/2)");
  EXPECT_EQ((past - seq).ToString(&t), "past-seq");
  EXPECT_EQ((3 - past).ToString(&t), "-past+3");
  EXPECT_EQ(Mod(h, 4).ToString(&t), "mod(H,4)");
  EXPECT_EQ(Min(past, seq).ToString(&t), "min(past,seq)");
  EXPECT_EQ(FloorDiv(past, 2 * seq).ToString(&t), "floor(past/(2*seq))");
  EXPECT_EQ((past + 1).ToString(), "$0+1");
  EXPECT_EQ(odd.ToString(&t), "\"batch size\\\"x\"");
  EXPECT_EQ(SymbolDisplayName("9lives"), "\"9lives\"");
  EXPECT_EQ(SymbolDisplayName("a\x1b[2J"), "\"a\\x1b[2J\"");
  EXPECT_EQ(SymbolDisplayName(""), "\"\"");
  EXPECT_EQ(SymShapeToString({1, past + 1, 64}, &t), "1x(past+1)x64");
  EXPECT_EQ(SymShapeToString({seq, 3}, &t), "seqx3");
  EXPECT_EQ(SymShapeToString({}, &t), "scalar");
  EXPECT_EQ(SymNumElements({2, past + 1, 3}), 6 * past + 6);
  EXPECT_EQ(SymNumElements({}), DimExpr(1));
  EXPECT_EQ(StaticShape(ToSymShape({1, 3, 224})), (std::vector<int64_t>{1, 3, 224}));
  EXPECT_EQ(StaticShape({1, seq}), std::nullopt);
  DimExpr big = past;
  for (int i = 0; i < 40; ++i) big = big + FloorDiv(past, i + 2);
  ASSERT_TRUE(big.valid()) << big.error();
  const std::string cut = big.ToString(&t, 100);
  EXPECT_EQ(cut.size(), 103u);
  EXPECT_EQ(cut.substr(100), "...");
}

TEST(Symbolic, SymbolTable) {
  SymbolTable t;
  ASSERT_EQ(t.Add("seq", 1, 512).value(), 0);
  ASSERT_EQ(t.Add("past", 0, 1023).value(), 1);
  EXPECT_EQ(t.Find("past"), 1);
  EXPECT_EQ(t.Find("nope"), -1);
  EXPECT_REFUSED(t.Add("seq", 1, 2), StatusCode::kInvalidArgument, "already defined");
  EXPECT_REFUSED(t.Add("x", 5, 4), StatusCode::kInvalidArgument, "lo > hi");
  EXPECT_REFUSED(t.SetRange(0, 9, 8), StatusCode::kInvalidArgument, "lo > hi");
  EXPECT_REFUSED(t.SetRange(7, 1, 8), StatusCode::kInvalidArgument, "no symbol with id 7");
  ASSERT_TRUE(t.SetRange(0, 1, 64).ok());
  EXPECT_EQ(t[0].hi, 64);
  const int64_t ok[] = {64, 0};
  EXPECT_TRUE(t.CheckValues(ok).ok());
  const int64_t bad[] = {65, 0};
  EXPECT_REFUSED(t.CheckValues(bad), StatusCode::kInvalidArgument, "symbol seq = 65 is outside its range 1..64");
  const int64_t few[] = {1};
  EXPECT_REFUSED(t.CheckValues(few), StatusCode::kInvalidArgument, "1 symbol values for 2 symbols");
  EXPECT_EQ((t.Expr(1) * t.Expr(0) + t.Expr(1)).Symbols(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(DimExpr(5).Symbols().empty());
}

TEST(Symbolic, EvaluateErrors) {
  Syms s;
  EXPECT_EQ(Eval(FloorDiv(s.a, s.b), {7, -2, 0}), -4);
  EXPECT_REFUSED(FloorDiv(s.a, s.b).Evaluate(std::vector<int64_t>{7, 0, 0}), StatusCode::kInvalidArgument,
                 "division by zero");
  EXPECT_REFUSED(Mod(s.a, s.c).Evaluate(std::vector<int64_t>{7, 0, 0}), StatusCode::kInvalidArgument,
                 "division by zero");
  EXPECT_REFUSED(FloorDiv(s.a, 0).Evaluate(std::vector<int64_t>{7, 0, 0}), StatusCode::kInvalidArgument,
                 "division by zero");
  EXPECT_REFUSED((s.a * s.b).Evaluate(std::vector<int64_t>{kMax, 2, 0}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_REFUSED((s.a + 1).Evaluate(std::vector<int64_t>{kMax, 0, 0}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_REFUSED(FloorDiv(s.a, s.b).Evaluate(std::vector<int64_t>{kMin, -1, 0}), StatusCode::kInvalidArgument,
                 "overflow");
  EXPECT_EQ(Eval(Mod(s.a, s.b), {kMin, -1, 0}), 0);
  EXPECT_REFUSED((s.a + s.c).Evaluate(std::vector<int64_t>{1}), StatusCode::kInvalidArgument,
                 "1 symbol values were given");
}

TEST(Symbolic, InvalidExpressionsPropagate) {
  Syms s;
  DimExpr over = DimExpr(kMax) + 1;
  EXPECT_FALSE(over.valid());
  EXPECT_NE(over.error().find("overflow"), std::string::npos);
  DimExpr x = s.a * kMax * 2;
  EXPECT_FALSE(x.valid());
  EXPECT_FALSE((x + s.b).valid());
  EXPECT_FALSE(FloorDiv(s.b, x).valid());
  EXPECT_FALSE(Min(s.b, x).valid());
  EXPECT_REFUSED(x.Evaluate(std::vector<int64_t>{1, 1, 1}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_REFUSED(x.Bounds(s.table), StatusCode::kInvalidArgument, "overflow");
  const DimExpr exprs[] = {s.a, x};
  EXPECT_REFUSED(DimProgram::Compile(exprs, 3), StatusCode::kInvalidArgument, "output 1");
  EXPECT_FALSE(DimExpr::Symbol(-1).valid());
  EXPECT_FALSE(FloorDiv(DimExpr(kMin), -1).valid());
  // Growth past the limits gives an invalid expression, not a slow one.
  DimExpr g = s.a;
  for (int i = 0; i < 40 && g.valid(); ++i) g = FloorDiv(g, 2 * s.b) + FloorDiv(g, 3 * s.c);
  EXPECT_FALSE(g.valid());
  EXPECT_NE(g.error().find("more than"), std::string::npos) << g.error();
  DimExpr p = s.a + s.b + s.c + 1;
  for (int i = 0; i < 60 && p.valid(); ++i) p = p * (s.a + s.b + s.c + 1 + i);
  EXPECT_FALSE(p.valid());
  DimExpr d = s.a;
  for (int i = 0; i < DimExpr::kMaxDepth + 5 && d.valid(); ++i) d = Max(d, s.b) + 1;
  EXPECT_FALSE(d.valid());
  EXPECT_NE(d.error().find("deep"), std::string::npos) << d.error();
}

TEST(Symbolic, Bounds) {
  SymbolTable t;
  DimExpr past = t.Expr(t.Add("past", 1, 1023).value());
  DimExpr h = t.Expr(t.Add("H", 64, 512).value());
  DimExpr z = t.Expr(t.Add("z", -2, 3).value());
  DimExpr zero = t.Expr(t.Add("zero", 0, 0).value());
  EXPECT_EQ((past + 1).Bounds(t).value(), (DimRange{2, 1024}));
  EXPECT_EQ(FloorDiv(h + 1, 2).Bounds(t).value(), (DimRange{32, 256}));
  EXPECT_EQ((h * past).Bounds(t).value(), (DimRange{64, 512 * 1023}));
  EXPECT_EQ((past - h).Bounds(t).value(), (DimRange{1 - 512, 1023 - 64}));
  EXPECT_EQ(Mod(h, 7).Bounds(t).value(), (DimRange{0, 6}));
  EXPECT_EQ(Min(past, h).Bounds(t).value(), (DimRange{1, 512}));
  EXPECT_EQ(Max(past, h).Bounds(t).value(), (DimRange{64, 1023}));
  // A divisor range with zero: the values where it is not zero.
  EXPECT_EQ(FloorDiv(h, z).Bounds(t).value(), (DimRange{-512, 512}));
  EXPECT_REFUSED(FloorDiv(h, zero).Bounds(t), StatusCode::kInvalidArgument, "always zero");
  SymbolTable small;
  EXPECT_REFUSED(h.Bounds(small), StatusCode::kInvalidArgument, "not in the symbol table");
  SymbolTable huge;
  DimExpr x = huge.Expr(huge.Add("x", 0, kMax).value());
  EXPECT_REFUSED((x * 2).Bounds(huge), StatusCode::kInvalidArgument, "overflows");
}

TEST(Symbolic, SimplifyWithRanges) {
  SymbolTable t;
  DimExpr seq = t.Expr(t.Add("seq", 1, 512).value());
  DimExpr h = t.Expr(t.Add("H", 10, 20).value());
  DimExpr z = t.Expr(t.Add("z", -3, 3).value());
  EXPECT_EQ(Max(seq - 1, 0).Simplify(t), seq - 1);
  EXPECT_EQ(Min(seq, 1024).Simplify(t), seq);
  EXPECT_EQ(Min(seq, 512).Simplify(t), seq);
  EXPECT_EQ(FloorDiv(seq, 1024).Simplify(t), DimExpr(0));
  EXPECT_EQ(FloorDiv(h + 11, 32).Simplify(t), DimExpr(0));
  EXPECT_EQ(FloorDiv(h + 12, 32).Simplify(t), FloorDiv(h + 12, 32));  // 22..32 crosses 32
  EXPECT_EQ(FloorDiv(h + 20, 32).Simplify(t), FloorDiv(h + 20, 32));  // 30..40 crosses 32
  EXPECT_EQ(Mod(seq, 1024).Simplify(t), seq);
  EXPECT_EQ(Mod(h + 30, 64).Simplify(t), h + 30);
  EXPECT_EQ(Mod(h + 70, 64).Simplify(t), h + 6);
  EXPECT_EQ(Min(Max(h - 5, 0), h).Simplify(t), h - 5);
  EXPECT_EQ((2 * Max(h, 0) + Min(h, 3) + seq).Simplify(t), 2 * h + 3 + seq);
  EXPECT_EQ(Max(z, 0).Simplify(t), Max(z, 0));  // undecided: kept
  EXPECT_EQ(Mod(seq, h).Simplify(t), Mod(seq, h));
  SymbolTable none;
  EXPECT_EQ(Max(seq - 1, 0).Simplify(none), Max(seq - 1, 0));
  EXPECT_EQ(DimExpr(7).Simplify(t), DimExpr(7));
}

// ---------------------------------------------------------------------------
// Random expressions against an independent evaluator

struct Tree {
  enum Kind { kConst, kSym, kAdd, kSub, kMul, kNeg, kFloorDiv, kCeilDiv, kMod, kMin, kMax } kind = kConst;
  int64_t value = 0;
  int sym = 0;
  std::shared_ptr<Tree> x, y;
};
using TreePtr = std::shared_ptr<Tree>;

TreePtr Leaf(std::mt19937_64& rng, int num_syms) {
  auto t = std::make_shared<Tree>();
  if (rng() % 3 == 0) {
    t->kind = Tree::kConst;
    t->value = static_cast<int64_t>(rng() % 13) - 6;
  } else {
    t->kind = Tree::kSym;
    t->sym = static_cast<int>(rng() % num_syms);
  }
  return t;
}

TreePtr RandomTree(std::mt19937_64& rng, int num_syms, int depth);

// Divisors: mostly positive constants (where the simplification rules
// apply), sometimes negative, zero or an expression.
TreePtr Divisor(std::mt19937_64& rng, int num_syms, int depth) {
  const int r = static_cast<int>(rng() % 10);
  if (r < 6) {
    auto t = std::make_shared<Tree>();
    t->value = 2 + static_cast<int64_t>(rng() % 5);
    return t;
  }
  if (r == 6) {
    auto t = std::make_shared<Tree>();
    t->value = -static_cast<int64_t>(1 + rng() % 4);
    return t;
  }
  if (r == 7) return std::make_shared<Tree>();  // 0
  return depth > 0 ? RandomTree(rng, num_syms, depth - 1) : Leaf(rng, num_syms);
}

TreePtr RandomTree(std::mt19937_64& rng, int num_syms, int depth) {
  if (depth == 0 || rng() % 4 == 0) return Leaf(rng, num_syms);
  auto t = std::make_shared<Tree>();
  if (rng() % 12 == 0) {
    // (p*q) / q or (p*q) mod q: exact divisions by an expression.
    auto product = std::make_shared<Tree>();
    product->kind = Tree::kMul;
    product->x = RandomTree(rng, num_syms, depth - 1);
    product->y = RandomTree(rng, num_syms, depth - 1);
    t->kind = rng() % 3 == 0 ? Tree::kMod : Tree::kFloorDiv;
    t->x = product;
    t->y = rng() % 2 ? product->y : product->x;
    return t;
  }
  t->kind = static_cast<Tree::Kind>(2 + rng() % 9);
  t->x = RandomTree(rng, num_syms, depth - 1);
  if (t->kind == Tree::kFloorDiv || t->kind == Tree::kCeilDiv || t->kind == Tree::kMod) {
    t->y = Divisor(rng, num_syms, depth - 1);
  } else if (t->kind != Tree::kNeg) {
    t->y = RandomTree(rng, num_syms, depth - 1);
  }
  return t;
}

// The literal value, computed in 128 bits; nullopt on a zero divisor or a
// value outside int64.
std::optional<int64_t> Direct(const Tree& t, const std::vector<int64_t>& v) {
  using I = __int128;
  auto fits = [](I r) -> std::optional<int64_t> {
    if (r < static_cast<I>(kMin) || r > static_cast<I>(kMax)) return std::nullopt;
    return static_cast<int64_t>(r);
  };
  switch (t.kind) {
    case Tree::kConst: return t.value;
    case Tree::kSym: return v[t.sym];
    default: break;
  }
  const std::optional<int64_t> a = Direct(*t.x, v);
  if (!a) return std::nullopt;
  if (t.kind == Tree::kNeg) return fits(-static_cast<I>(*a));
  const std::optional<int64_t> b = Direct(*t.y, v);
  if (!b) return std::nullopt;
  const I x = *a, y = *b;
  // floor(x / y) by its definition: the largest q with q*y <= x (y > 0) or q*y >= x (y < 0).
  auto floor_div = [](I x, I y) {
    I q = x / y;
    if (q * y != x && ((x < 0) != (y < 0))) q -= 1;
    return q;
  };
  switch (t.kind) {
    case Tree::kAdd: return fits(x + y);
    case Tree::kSub: return fits(x - y);
    case Tree::kMul: return fits(x * y);
    case Tree::kFloorDiv:
      if (y == 0) return std::nullopt;
      return fits(floor_div(x, y));
    case Tree::kCeilDiv:
      if (y == 0) return std::nullopt;
      return fits(-floor_div(-x, y));
    case Tree::kMod:
      if (y == 0) return std::nullopt;
      return fits(x - y * floor_div(x, y));
    case Tree::kMin: return *a < *b ? *a : *b;
    case Tree::kMax: return *a > *b ? *a : *b;
    default: return std::nullopt;
  }
}

// The tree as a DimExpr; `swap` builds commutative operations the other way
// round (and adds neutral operations), which must give an equal expression.
DimExpr Build(const Tree& t, bool swap) {
  switch (t.kind) {
    case Tree::kConst: return DimExpr(t.value);
    case Tree::kSym: return swap ? DimExpr::Symbol(t.sym) * 1 + 0 : DimExpr::Symbol(t.sym);
    default: break;
  }
  const DimExpr a = Build(*t.x, swap);
  if (t.kind == Tree::kNeg) return swap ? 0 - a : -a;
  const DimExpr b = Build(*t.y, swap);
  switch (t.kind) {
    case Tree::kAdd: return swap ? b + a : a + b;
    case Tree::kSub: return swap ? -b + a : a - b;
    case Tree::kMul: return swap ? b * a : a * b;
    case Tree::kFloorDiv: return FloorDiv(a, b);
    case Tree::kCeilDiv: return CeilDiv(a, b);
    case Tree::kMod: return Mod(a, b);
    case Tree::kMin: return swap ? Min(b, a) : Min(a, b);
    case Tree::kMax: return swap ? Max(b, a) : Max(a, b);
    default: return DimExpr();
  }
}

std::vector<std::vector<int64_t>> AllPoints(const SymbolTable& t) {
  std::vector<std::vector<int64_t>> pts(1);
  for (const SymbolInfo& s : t.symbols()) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& p : pts) {
      for (int64_t v = s.lo; v <= s.hi; ++v) {
        next.push_back(p);
        next.back().push_back(v);
      }
    }
    pts = std::move(next);
  }
  return pts;
}

TEST(SymbolicProperty, RandomExpressionsAgreeWithDirectEvaluation) {
  std::mt19937_64 rng(20261205);
  int64_t checked_points = 0, rejected_points = 0, constant_exprs = 0, simplified = 0;
  for (int num_syms = 2; num_syms <= 3; ++num_syms) {
    SymbolTable table;
    table.Add("a", 1, 9).value();
    table.Add("b", -4, 5).value();
    if (num_syms == 3) table.Add("c", 0, 3).value();
    const auto points = AllPoints(table);
    std::vector<DimExpr> batch;
    for (int iter = 0; iter < 600; ++iter) {
      const TreePtr tree = RandomTree(rng, num_syms, 1 + static_cast<int>(rng() % 4));
      const DimExpr e = Build(*tree, false);
      ASSERT_TRUE(e.valid()) << e.error();
      const std::string text = e.ToString(&table);
      SCOPED_TRACE(text);
      // Canonical: built in another order, it is the same expression.
      const DimExpr e2 = Build(*tree, true);
      EXPECT_EQ(e, e2) << e2.ToString(&table);
      EXPECT_EQ(e.Hash(), e2.Hash());
      EXPECT_EQ(DimExpr::Compare(e, e2), 0);
      if (!batch.empty()) {
        EXPECT_EQ(DimExpr::Compare(e, batch.back()), -DimExpr::Compare(batch.back(), e));
      }
      constant_exprs += e.IsConstant();
      batch.push_back(e);

      const DimExpr one[] = {e};
      Result<DimProgram> prog = DimProgram::Compile(one, table.size());
      ASSERT_TRUE(prog.ok()) << prog.status().ToString();
      const std::vector<int64_t>& words = prog->Encode();
      Result<DimProgram> again = DimProgram::Decode(words.data(), words.size(), table.size());
      ASSERT_TRUE(again.ok()) << again.status().ToString();
      EXPECT_EQ(again->Encode(), words);
      std::vector<int64_t> scratch(again->num_slots()), out(1);

      const Result<DimRange> bounds = e.Bounds(table);
      const DimExpr simple = e.Simplify(table);
      ASSERT_TRUE(simple.valid()) << simple.error();
      const Result<DimRange> simple_bounds = simple.Bounds(table);
      simplified += simple != e;
      bool any_ok = false;
      for (const auto& p : points) {
        const std::optional<int64_t> want = Direct(*tree, p);
        const Result<int64_t> got = e.Evaluate(p);
        if (want) {
          ASSERT_TRUE(got.ok()) << "at " << ::testing::PrintToString(p) << ": " << got.status().ToString();
          ASSERT_EQ(got.value(), *want) << "at " << ::testing::PrintToString(p);
          ++checked_points;
        } else {
          ++rejected_points;
        }
        const Status ps = again->Evaluate(p, scratch, out);
        ASSERT_EQ(ps.ok(), got.ok()) << "at " << ::testing::PrintToString(p) << ": " << ps.ToString();
        if (!got.ok()) continue;
        any_ok = true;
        ASSERT_EQ(out[0], got.value());
        ASSERT_TRUE(bounds.ok()) << bounds.status().ToString();
        ASSERT_TRUE(bounds->Contains(got.value()))
            << got.value() << " at " << ::testing::PrintToString(p) << " outside [" << bounds->lo << ", "
            << bounds->hi << "]";
        const Result<int64_t> s = simple.Evaluate(p);
        ASSERT_TRUE(s.ok()) << simple.ToString(&table) << " at " << ::testing::PrintToString(p) << ": "
                            << s.status().ToString();
        ASSERT_EQ(s.value(), got.value()) << simple.ToString(&table) << " at " << ::testing::PrintToString(p);
        ASSERT_TRUE(simple_bounds.ok()) << simple_bounds.status().ToString();
        ASSERT_TRUE(simple_bounds->Contains(got.value())) << simple.ToString(&table);
      }
      if (!any_ok) EXPECT_FALSE(e.IsConstant());
    }
    // All of them in one program: shared subexpressions once, the same values.
    Result<DimProgram> all = DimProgram::Compile(batch, table.size());
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    std::vector<int64_t> scratch(all->num_slots()), out(all->num_outputs());
    for (size_t pi = 0; pi < points.size(); pi += 7) {
      const auto& p = points[pi];
      bool all_ok = true;
      std::vector<int64_t> want;
      for (const DimExpr& e : batch) {
        Result<int64_t> r = e.Evaluate(p);
        all_ok &= r.ok();
        want.push_back(r.ok() ? r.value() : 0);
      }
      const Status s = all->Evaluate(p, scratch, out);
      ASSERT_EQ(s.ok(), all_ok) << s.ToString();
      if (all_ok) EXPECT_EQ(out, want);
    }
  }
  // The test exercises what it claims to.
  EXPECT_GT(checked_points, 200000);
  EXPECT_GT(rejected_points, 1000);
  EXPECT_LT(constant_exprs, 400);
  EXPECT_GT(simplified, 20);
}

// ---------------------------------------------------------------------------
// DimProgram

TEST(DimProgram, SharesSubexpressionsAndEvaluates) {
  SymbolTable t;
  DimExpr seq = t.Expr(t.Add("seq", 1, 512).value());
  DimExpr past = t.Expr(t.Add("past", 0, 1023).value());
  std::vector<DimExpr> exprs;
  for (int i = 0; i < 300; ++i) {
    switch (i % 5) {
      case 0: exprs.push_back(seq); break;
      case 1: exprs.push_back(past + seq); break;
      case 2: exprs.push_back(64 * (past + seq)); break;
      case 3: exprs.push_back(FloorDiv(seq + 1, 2)); break;
      default: exprs.push_back(i); break;
    }
  }
  Result<DimProgram> p = DimProgram::Compile(exprs, t.size());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->num_outputs(), 300u);
  EXPECT_LT(p->num_slots(), 80u);  // 60 distinct constants and a handful of shared nodes
  std::vector<int64_t> scratch(p->num_slots()), out(p->num_outputs());
  const int64_t v[] = {7, 100};
  ASSERT_TRUE(p->Evaluate(v, scratch, out).ok());
  for (size_t i = 0; i < exprs.size(); ++i) EXPECT_EQ(out[i], Eval(exprs[i], {7, 100})) << i;
  EXPECT_EQ(out[2], 64 * 107);
  EXPECT_EQ(out[3], 4);
  std::vector<int64_t> slots(p->num_slots());
  ASSERT_TRUE(p->Evaluate(v, slots).ok());
  for (size_t i = 0; i < exprs.size(); ++i) EXPECT_EQ(slots[p->output_slot(i)], out[i]) << i;
  std::vector<int64_t> few_outputs(p->num_outputs() - 1);
  EXPECT_REFUSED(p->Evaluate(v, scratch, few_outputs), StatusCode::kInvalidArgument, "299 outputs given");
  std::vector<int64_t> small(p->num_slots() - 1);
  EXPECT_REFUSED(p->Evaluate(v, small, out), StatusCode::kInvalidArgument, "scratch");
  const int64_t one_value[] = {7};
  EXPECT_REFUSED(p->Evaluate(one_value, scratch, out), StatusCode::kInvalidArgument, "symbol values");
  const DimExpr beyond[] = {seq};
  EXPECT_REFUSED(DimProgram::Compile(beyond, 0), StatusCode::kInvalidArgument, "0 symbols");
  Result<DimProgram> empty = DimProgram::Compile({}, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->Evaluate({}, {}, {}).ok());
}

TEST(DimProgram, RunTimeErrorsAreReported) {
  Syms s;
  std::vector<int64_t> scratch(64), out(4);
  auto run = [&](const DimExpr& e, std::vector<int64_t> v) {
    const DimExpr one[] = {e};
    Result<DimProgram> p = DimProgram::Compile(one, 3);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? p->Evaluate(v, scratch, out) : p.status();
  };
  EXPECT_REFUSED(run(FloorDiv(s.a, s.b), {5, 0, 0}), StatusCode::kInvalidArgument, "division by zero");
  EXPECT_REFUSED(run(Mod(s.a, s.b), {5, 0, 0}), StatusCode::kInvalidArgument, "division by zero");
  EXPECT_REFUSED(run(FloorDiv(s.a, 0), {5, 0, 0}), StatusCode::kInvalidArgument, "division by zero");
  EXPECT_REFUSED(run(FloorDiv(s.a, s.b), {kMin, -1, 0}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_REFUSED(run(s.a * s.b, {kMax, 3, 0}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_REFUSED(run(s.a + s.b, {kMax, 3, 0}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_REFUSED(run(s.a + 1, {kMax, 0, 0}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_REFUSED(run(s.a * 4, {kMax / 2, 0, 0}), StatusCode::kInvalidArgument, "overflow");
  EXPECT_TRUE(run(Mod(s.a, s.b), {kMin, -1, 0}).ok());
  EXPECT_EQ(out[0], 0);
}

std::vector<int64_t> SampleWords() {
  Syms s;
  const DimExpr exprs[] = {s.a + 1, FloorDiv(s.a * s.b, s.c), Mod(s.a, 3), Max(s.a, s.b), 5};
  return DimProgram::Compile(exprs, 3).value().Encode();
}

TEST(DimProgram, DecodeRefusesMalformedWords) {
  const std::vector<int64_t> good = SampleWords();
  ASSERT_TRUE(DimProgram::Decode(good.data(), good.size(), 3).ok());
  auto decode = [](std::vector<int64_t> w, size_t num_symbols = 3) {
    return DimProgram::Decode(w.data(), w.size(), num_symbols);
  };
  EXPECT_REFUSED(DimProgram::Decode(nullptr, 0, 3), StatusCode::kCorruptFile, "fewer than its 3-word header");
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<int64_t> cut(good.begin(), good.begin() + n);
    EXPECT_EQ(decode(cut).status().code(), StatusCode::kCorruptFile) << n;
  }
  {
    std::vector<int64_t> w = good;
    w.push_back(0);
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "its header says");
  }
  {
    std::vector<int64_t> w = good;
    w[0] ^= 1;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "bad magic");
  }
  {
    std::vector<int64_t> w = good;
    w[1] = int64_t{1} << 40;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "instructions (at most");
    w[1] = -1;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "instructions (at most");
    w = good;
    w[2] = kMax;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "outputs (at most");
  }
  const int64_t num_instr = good[1], num_out = good[2];
  const size_t code = 3 + static_cast<size_t>(num_out);
  {
    std::vector<int64_t> w = good;
    w[3] = num_instr;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "output 0 refers to slot");
    w[3] = -1;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "output 0 refers to slot");
  }
  // Find instructions of each form and break them.
  auto find = [&](DimProgram::Op op) -> size_t {
    for (int64_t i = 0; i < num_instr; ++i) {
      if (good[code + 3 * i] == static_cast<int64_t>(op)) return static_cast<size_t>(i);
    }
    ADD_FAILURE() << "no instruction " << static_cast<int>(op);
    return 0;
  };
  {
    std::vector<int64_t> w = good;
    w[code] = 99;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "instruction 0: unknown opcode 99");
    w[code] = 0;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "unknown opcode 0");
  }
  {
    const size_t i = find(DimProgram::Op::kSymbol);
    std::vector<int64_t> w = good;
    w[code + 3 * i + 1] = 3;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "symbol id 3 is not one of the 3 symbols");
    EXPECT_REFUSED(decode(good, 2), StatusCode::kCorruptFile, "is not one of the 2 symbols");
    w = good;
    w[code + 3 * i + 2] = 1;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "unused operand");
  }
  for (DimProgram::Op op : {DimProgram::Op::kMul, DimProgram::Op::kFloorDiv, DimProgram::Op::kMax}) {
    const size_t i = find(op);
    for (int operand = 1; operand <= 2; ++operand) {
      for (int64_t ref : {static_cast<int64_t>(i), static_cast<int64_t>(i) + 1, int64_t{-1}, kMax, kMin}) {
        std::vector<int64_t> w = good;
        w[code + 3 * i + operand] = ref;
        EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "is not an earlier slot");
      }
    }
  }
  {
    const size_t i = find(DimProgram::Op::kModK);
    std::vector<int64_t> w = good;
    w[code + 3 * i + 2] = 0;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "constant divisor 0 <= 0");
    w[code + 3 * i + 2] = -3;
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "constant divisor -3 <= 0");
    w = good;
    w[code + 3 * i + 1] = static_cast<int64_t>(i);
    EXPECT_REFUSED(decode(w), StatusCode::kCorruptFile, "is not an earlier slot");
  }
}

TEST(DimProgram, RandomWordsNeverCrash) {
  std::mt19937_64 rng(34);
  const std::vector<int64_t> good = SampleWords();
  int accepted = 0, refused = 0;
  auto interesting = [&]() -> int64_t {
    switch (rng() % 6) {
      case 0: return static_cast<int64_t>(rng() % 16);
      case 1: return -static_cast<int64_t>(rng() % 4);
      case 2: return kMax - static_cast<int64_t>(rng() % 2);
      case 3: return kMin + static_cast<int64_t>(rng() % 2);
      case 4: return static_cast<int64_t>(rng());
      default: return static_cast<int64_t>(rng() % 13);
    }
  };
  for (int iter = 0; iter < 30000; ++iter) {
    std::vector<int64_t> w;
    if (iter % 2 == 0) {
      // Mutations of a valid program: most get past the header.
      w = good;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) w[rng() % w.size()] = interesting();
    } else {
      // Fresh programs with a consistent header.
      const int64_t ni = static_cast<int64_t>(rng() % 8), no = static_cast<int64_t>(rng() % 4);
      w = {DimProgram::kMagic, ni, no};
      for (int64_t i = 0; i < no; ++i) w.push_back(static_cast<int64_t>(rng() % (ni + 1)));
      for (int64_t i = 0; i < ni; ++i) {
        w.push_back(1 + static_cast<int64_t>(rng() % 12));
        w.push_back(rng() % 4 ? static_cast<int64_t>(rng() % (i + 1)) : interesting());
        w.push_back(rng() % 4 ? static_cast<int64_t>(rng() % (i + 1)) : interesting());
      }
      if (rng() % 8 == 0) w.resize(rng() % (w.size() + 1));
    }
    Result<DimProgram> p = DimProgram::Decode(w.data(), w.size(), 3);
    if (!p.ok()) {
      ++refused;
      EXPECT_EQ(p.status().code(), StatusCode::kCorruptFile);
      EXPECT_NE(p.status().message().find("dimension program"), std::string::npos);
      continue;
    }
    ++accepted;
    EXPECT_EQ(p->Encode(), w);
    std::vector<int64_t> scratch(p->num_slots()), out(p->num_outputs());
    for (int k = 0; k < 4; ++k) {
      const int64_t v[] = {interesting(), interesting(), interesting()};
      const Status s = p->Evaluate(v, scratch, out);
      if (!s.ok()) {
        const std::string& m = s.message();
        EXPECT_TRUE(m.find("overflow") != std::string::npos || m.find("division by zero") != std::string::npos)
            << m;
      }
    }
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace fcb::ir
