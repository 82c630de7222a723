// Symbolic dimensions: integer expressions over symbols bounded at compile
// time and chosen at each run.
//
// A symbol is a named dimension (the model's dim_param) with a range
// [lo, hi]. A DimExpr is an integer expression over symbols: constants,
// symbols, +, -, *, floor division, modulo, min and max. DimExprs are kept in
// a canonical form (a sum of integer multiples of products of atoms, see
// docs/design.md, "Symbolic dimensions") so that equal expressions built in
// different orders usually compare equal; a constant DimExpr holds no
// allocation, so static shapes cost what plain integers cost.
//
// A DimProgram is a list of DimExprs compiled into a flat array of int64
// words that evaluates all of them in one linear pass without allocating;
// it is what a plan stores, and Decode verifies hostile words completely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fcb/status.h"

namespace fcb::ir {

class DimExpr;

// One bounded symbol: every run chooses a value in [lo, hi].
struct SymbolInfo {
  std::string name;
  int64_t lo = 0;
  int64_t hi = 0;
};

// The symbols of a model; a symbol's id is its index here.
class SymbolTable {
 public:
  // Adds a symbol and returns its id. InvalidArgument when `name` is already
  // in the table or lo > hi.
  Result<int> Add(std::string name, int64_t lo, int64_t hi);
  // The id of the symbol called `name`, or -1.
  int Find(std::string_view name) const;
  // Replaces the range of symbol `id` (InvalidArgument when lo > hi or the
  // id is unknown).
  Status SetRange(int id, int64_t lo, int64_t hi);
  size_t size() const { return symbols_.size(); }
  bool empty() const { return symbols_.empty(); }
  const SymbolInfo& operator[](size_t id) const { return symbols_[id]; }
  const std::vector<SymbolInfo>& symbols() const { return symbols_; }
  // The expression that is symbol `id`.
  DimExpr Expr(int id) const;
  // OK when values has one entry per symbol, each within its range; else
  // InvalidArgument naming the symbol, its value and its range.
  Status CheckValues(std::span<const int64_t> values) const;

 private:
  std::vector<SymbolInfo> symbols_;
};

// `name` as it appears in expressions: as is when it is a plain identifier
// ([A-Za-z_][A-Za-z0-9_]*), else in double quotes with '"' and '\' escaped
// by a backslash and unprintable bytes as \xNN.
std::string SymbolDisplayName(std::string_view name);

// [lo, hi], both included.
struct DimRange {
  int64_t lo = 0;
  int64_t hi = 0;
  bool Contains(int64_t v) const { return lo <= v && v <= hi; }
  bool operator==(const DimRange&) const = default;
};

namespace detail {
struct DimNode;     // the canonical node of a non-constant expression (symbolic.cc)
struct DimBuilder;  // makes canonical nodes (symbolic.cc)
}

// An immutable integer expression over symbols (by id). Cheap to copy: a
// constant is held inline, anything else is a shared canonical node.
//
// Arithmetic never fails: an operation whose canonical form cannot be built
// (a folded constant or coefficient overflows int64, or the expression grows
// past the size limits below) gives an invalid expression, which every
// further operation propagates; Evaluate, Bounds and DimProgram::Compile
// report its reason. valid() tells.
//
// Semantics: FloorDiv rounds toward minus infinity, Mod(a, b) is
// a - b*FloorDiv(a, b) (its sign is the divisor's); dividing by zero is an
// error when evaluated. Simplification may drop a subexpression (x - x is 0,
// 0*x is 0), so an expression can evaluate where a literal evaluation of the
// operations it was built from would divide by zero; where that literal
// evaluation succeeds without overflowing, Evaluate gives the same value.
class DimExpr {
 public:
  // Limits on one expression: nodes counted as a tree (a shared
  // subexpression counts at each use), nesting of floor/mod/min/max, terms
  // of one sum.
  static constexpr int64_t kMaxNodes = 1 << 16;
  static constexpr int kMaxDepth = 256;
  static constexpr size_t kMaxTerms = 256;

  DimExpr() = default;                         // 0
  DimExpr(int64_t value) : constant_(value) {}  // NOLINT: implicit by design
  static DimExpr Symbol(int id);

  bool IsConstant() const { return node_ == nullptr; }
  // The value of a constant expression (0 for a non-constant one).
  int64_t constant_value() const { return node_ ? 0 : constant_; }
  std::optional<int64_t> AsConstant() const {
    return node_ ? std::nullopt : std::optional<int64_t>(constant_);
  }
  // False for the result of an operation that overflowed or grew too large.
  bool valid() const;
  // Why it is invalid ("" when valid).
  std::string error() const;
  // Its nodes counted as a tree (a shared subexpression at each use): 1 for
  // a constant; what kMaxNodes limits.
  int64_t size() const;

  // The value for the given symbol values (indexed by symbol id).
  // InvalidArgument on a division by zero, an int64 overflow, a symbol id
  // without a value, or an invalid expression.
  Result<int64_t> Evaluate(std::span<const int64_t> symbol_values) const;

  // An interval holding every value Evaluate returns successfully for symbol
  // values within the table's ranges (interval arithmetic: never too narrow,
  // loose where symbols repeat, e.g. s*s or s - floor(s/2), and for mod by a
  // range). InvalidArgument when a bound overflows int64, a symbol is not in
  // the table, a divisor is always zero, or the expression is invalid.
  Result<DimRange> Bounds(const SymbolTable& symbols) const;

  // The expression rewritten with what the table's ranges decide: a min or
  // max whose operands' bounds do not overlap is that operand, a floor or
  // mod by a positive constant whose dividend stays within one quotient
  // block is a sum (max(seq-1, 0) is seq-1 when seq >= 1). For symbol values
  // within the ranges it gives the value of the original wherever the
  // original evaluates without error; unchanged when the table has no entry
  // for one of its symbols.
  DimExpr Simplify(const SymbolTable& symbols) const;

  // The ids of the symbols it reads, ascending, each once.
  std::vector<int> Symbols() const;

  // "past+1", "2*seq", "floor((H+1)/2)", "mod(W,4)", "min(a,b)".
  // Symbols print by name when a table is given (SymbolDisplayName), else as
  // $id. Output beyond max_chars is cut and ends in "...".
  std::string ToString(const SymbolTable* symbols = nullptr, size_t max_chars = 4096) const;

  // Structural equality of canonical forms (equal expressions built in
  // different orders compare equal in the common cases; unequal canonical
  // forms may still be equal as functions).
  bool operator==(const DimExpr& other) const;
  bool operator!=(const DimExpr& other) const { return !(*this == other); }
  size_t Hash() const;
  // A total order on canonical forms (deterministic across runs).
  static int Compare(const DimExpr& a, const DimExpr& b);

  const detail::DimNode* node() const { return node_.get(); }  // null for a constant

 private:
  friend struct detail::DimBuilder;
  explicit DimExpr(std::shared_ptr<const detail::DimNode> node) : node_(std::move(node)) {}

  int64_t constant_ = 0;
  std::shared_ptr<const detail::DimNode> node_;
};

DimExpr operator+(const DimExpr& a, const DimExpr& b);
DimExpr operator-(const DimExpr& a, const DimExpr& b);
DimExpr operator*(const DimExpr& a, const DimExpr& b);
DimExpr operator-(const DimExpr& a);
inline DimExpr& operator+=(DimExpr& a, const DimExpr& b) { return a = a + b; }
inline DimExpr& operator-=(DimExpr& a, const DimExpr& b) { return a = a - b; }
inline DimExpr& operator*=(DimExpr& a, const DimExpr& b) { return a = a * b; }
DimExpr FloorDiv(const DimExpr& a, const DimExpr& b);
DimExpr CeilDiv(const DimExpr& a, const DimExpr& b);  // ceil(a/b) = -floor(-a/b)
DimExpr Mod(const DimExpr& a, const DimExpr& b);
DimExpr Min(const DimExpr& a, const DimExpr& b);
DimExpr Max(const DimExpr& a, const DimExpr& b);

struct DimExprHash {
  size_t operator()(const DimExpr& e) const { return e.Hash(); }
};

// A shape whose dimensions may be symbolic.
using SymShape = std::vector<DimExpr>;
std::string SymShapeToString(const SymShape& s, const SymbolTable* symbols = nullptr);  // "1x(past+1)x64"
SymShape ToSymShape(const std::vector<int64_t>& shape);
// The static shape when every dimension is a constant.
std::optional<std::vector<int64_t>> StaticShape(const SymShape& s);
// The product of the dimensions (1 for rank 0).
DimExpr SymNumElements(const SymShape& s);

// Expressions compiled for evaluation at run time: all outputs in one
// linear pass over fixed-width instructions, each writing one slot; shared
// subexpressions are computed once. Every operation is overflow-checked and
// a zero divisor is an error, never undefined behaviour.
//
// Words (the stored form): [kMagic, num_instructions, num_outputs,
// output slot x num_outputs, (opcode, x, y) x num_instructions]; see Op.
class DimProgram {
 public:
  static constexpr int64_t kMagic = 0x31504d4944;  // "DIMP1"
  static constexpr size_t kMaxInstructions = 1 << 20;
  static constexpr size_t kMaxOutputs = 1 << 20;

  // Instruction i writes slot i. x and y are earlier slots unless noted.
  enum class Op : int64_t {
    kConst = 1,      // x: the value
    kSymbol = 2,     // x: symbol id
    kAdd = 3,        // x + y
    kMul = 4,        // x * y
    kAddK = 5,       // x + y (y: a constant)
    kMulK = 6,       // x * y (y: a constant)
    kFloorDiv = 7,   // floor(x / y), y may be zero at run time (an error)
    kFloorDivK = 8,  // floor(x / y) (y: a constant > 0)
    kMod = 9,        // x mod y, y may be zero at run time (an error)
    kModK = 10,      // x mod y (y: a constant > 0)
    kMin = 11,
    kMax = 12,
  };

  DimProgram() = default;

  // Compiles `exprs`: output i is exprs[i]. InvalidArgument when an
  // expression is invalid or reads a symbol id >= num_symbols.
  static Result<DimProgram> Compile(std::span<const DimExpr> exprs, size_t num_symbols);
  // Verifies and loads stored words (CorruptFile naming the problem: size,
  // magic, counts, opcode, a reference to a later slot or an unknown symbol,
  // a constant divisor <= 0).
  static Result<DimProgram> Decode(const int64_t* words, size_t n, size_t num_symbols);
  const std::vector<int64_t>& Encode() const { return words_; }

  size_t num_symbols() const { return num_symbols_; }
  size_t num_outputs() const { return outputs_.size(); }
  size_t num_slots() const { return code_.size(); }  // scratch entries Evaluate needs

  // Evaluates every output: symbol_values has num_symbols() entries, scratch
  // at least num_slots(), outputs at least num_outputs(). Allocates nothing.
  // InvalidArgument on a division by zero or an overflow (naming the
  // instruction) or buffers that are too small; outputs are then unspecified.
  Status Evaluate(std::span<const int64_t> symbol_values, std::span<int64_t> scratch,
                  std::span<int64_t> outputs) const;
  // The same without copying the outputs: output i is then
  // scratch[output_slot(i)] (a caller that reads a few outputs per step
  // keeps their slots).
  Status Evaluate(std::span<const int64_t> symbol_values, std::span<int64_t> scratch) const;
  size_t output_slot(size_t i) const { return static_cast<size_t>(outputs_[i]); }

 private:
  struct Instr {
    Op op;
    int64_t x, y;
  };
  std::vector<int64_t> words_;
  std::vector<Instr> code_;
  std::vector<int64_t> outputs_;  // slot of each output
  size_t num_symbols_ = 0;
};

}  // namespace fcb::ir

template <>
struct std::hash<fcb::ir::DimExpr> {
  size_t operator()(const fcb::ir::DimExpr& e) const { return e.Hash(); }
};
