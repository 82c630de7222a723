#include "ir/symbolic.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace fcb::ir {

namespace {

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

bool AddOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool MulOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

// floor(a / b) for b != 0; false when it overflows (INT64_MIN / -1).
bool FloorDivChecked(int64_t a, int64_t b, int64_t* q) {
  if (b == -1) {
    if (a == kI64Min) return false;
    *q = -a;
    return true;
  }
  int64_t t = a / b;
  const int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) --t;
  *q = t;
  return true;
}

// a - b*floor(a / b) for b != 0: the sign of b, magnitude below |b|. Never overflows.
int64_t FloorMod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // a % -1 is undefined behaviour for INT64_MIN
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

size_t Mix(size_t h, uint64_t v) {
  uint64_t x = static_cast<uint64_t>(h) ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<size_t>(x);
}

size_t ConstantHash(int64_t c) { return Mix(0x51, static_cast<uint64_t>(c)); }

}  // namespace

namespace detail {

enum class AtomKind : uint8_t { kSymbol = 0, kFloorDiv = 1, kMod = 2, kMin = 3, kMax = 4 };

// A factor of a product: a symbol, or floor/mod/min/max of two expressions.
struct AtomNode {
  AtomKind kind = AtomKind::kSymbol;
  int symbol = -1;  // kSymbol
  DimExpr a, b;     // the operands of the others
  size_t hash = 0;
  int64_t size = 1;  // nodes counted as a tree
  int depth = 1;     // nesting of atoms
};
using Atom = std::shared_ptr<const AtomNode>;

// coef * atoms[0] * atoms[1] * ...; atoms sorted by CompareAtoms. Empty atoms
// is the constant term (only inside a Poly, never in a DimNode).
struct Term {
  int64_t coef = 0;
  std::vector<Atom> atoms;
};
using Poly = std::vector<Term>;

// A non-constant expression: constant + sum of terms, terms sorted by
// monomial with distinct monomials and non-zero coefficients. Or, when
// error is not empty, an invalid expression.
struct DimNode {
  std::string error;
  int64_t constant = 0;
  std::vector<Term> terms;
  size_t hash = 0;
  int64_t size = 1;
  int depth = 0;
};

int CompareAtoms(const AtomNode& a, const AtomNode& b);

int CompareMonomials(const std::vector<Atom>& a, const std::vector<Atom>& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (int c = CompareAtoms(*a[i], *b[i])) return c;
  }
  return 0;
}

int CompareAtoms(const AtomNode& a, const AtomNode& b) {
  if (&a == &b) return 0;
  if (a.kind != b.kind) return a.kind < b.kind ? -1 : 1;
  if (a.kind == AtomKind::kSymbol) return a.symbol == b.symbol ? 0 : (a.symbol < b.symbol ? -1 : 1);
  if (int c = DimExpr::Compare(a.a, b.a)) return c;
  return DimExpr::Compare(a.b, b.b);
}

int64_t ExprSize(const DimExpr& e) { return e.node() ? e.node()->size : 1; }
int ExprDepth(const DimExpr& e) { return e.node() ? e.node()->depth : 0; }

struct DimBuilder {
  static DimExpr Invalid(std::string why) {
    auto n = std::make_shared<DimNode>();
    n->error = std::move(why);
    n->hash = Mix(0x1d, std::hash<std::string>()(n->error));
    return DimExpr(std::move(n));
  }

  static DimExpr Overflow() {
    return Invalid("integer overflow (int64) while simplifying a dimension expression");
  }

  static Atom MakeAtom(AtomKind kind, int symbol, DimExpr a, DimExpr b) {
    auto n = std::make_shared<AtomNode>();
    n->kind = kind;
    n->symbol = symbol;
    if (kind == AtomKind::kSymbol) {
      n->hash = Mix(0x5e, static_cast<uint64_t>(symbol));
    } else {
      n->hash = Mix(Mix(Mix(0xa0, static_cast<uint64_t>(kind)), a.Hash()), b.Hash());
      n->size = std::min<int64_t>(1 + ExprSize(a) + ExprSize(b), DimExpr::kMaxNodes + 1);
      n->depth = 1 + std::max(ExprDepth(a), ExprDepth(b));
      n->a = std::move(a);
      n->b = std::move(b);
    }
    return n;
  }

  // The canonical expression of a sum of terms in any order.
  static DimExpr FromPoly(Poly p) {
    std::stable_sort(p.begin(), p.end(), [](const Term& x, const Term& y) {
      return CompareMonomials(x.atoms, y.atoms) < 0;
    });
    int64_t constant = 0;
    std::vector<Term> terms;
    for (size_t i = 0; i < p.size();) {
      int64_t coef = p[i].coef;
      size_t j = i + 1;
      for (; j < p.size() && CompareMonomials(p[i].atoms, p[j].atoms) == 0; ++j) {
        if (AddOverflows(coef, p[j].coef, &coef)) return Overflow();
      }
      if (coef != 0) {
        if (p[i].atoms.empty()) {
          constant = coef;
        } else {
          terms.push_back(Term{coef, std::move(p[i].atoms)});
        }
      }
      i = j;
    }
    if (terms.empty()) return DimExpr(constant);
    if (terms.size() > DimExpr::kMaxTerms) {
      return Invalid("dimension expression has more than " + std::to_string(DimExpr::kMaxTerms) +
                     " terms");
    }
    auto n = std::make_shared<DimNode>();
    n->constant = constant;
    size_t h = ConstantHash(constant);
    int64_t size = 1;
    int depth = 0;
    for (const Term& t : terms) {
      h = Mix(h, static_cast<uint64_t>(t.coef));
      size += 1;
      for (const Atom& a : t.atoms) {
        h = Mix(h, a->hash);
        size = std::min<int64_t>(size + a->size, DimExpr::kMaxNodes + 1);
        depth = std::max(depth, a->depth);
      }
    }
    if (size > DimExpr::kMaxNodes) {
      return Invalid("dimension expression has more than " + std::to_string(DimExpr::kMaxNodes) +
                     " nodes");
    }
    if (depth > DimExpr::kMaxDepth) {
      return Invalid("dimension expression nests floor/mod/min/max more than " +
                     std::to_string(DimExpr::kMaxDepth) + " deep");
    }
    n->terms = std::move(terms);
    n->hash = h;
    n->size = size;
    n->depth = depth;
    return DimExpr(std::move(n));
  }

  static DimExpr FromAtom(Atom a) {
    Poly p;
    p.push_back(Term{1, {std::move(a)}});
    return FromPoly(std::move(p));
  }

  static Poly ToPoly(const DimExpr& e) {
    Poly p;
    const DimNode* n = e.node();
    const int64_t c = n ? n->constant : e.constant_value();
    if (c != 0) p.push_back(Term{c, {}});
    if (n) p.insert(p.end(), n->terms.begin(), n->terms.end());
    return p;
  }

  static bool IsInvalid(const DimExpr& e) { return e.node() && !e.node()->error.empty(); }

  static DimExpr Add(const DimExpr& a, const DimExpr& b) {
    if (IsInvalid(a)) return a;
    if (IsInvalid(b)) return b;
    if (a.IsConstant() && b.IsConstant()) {
      int64_t r;
      if (AddOverflows(a.constant_value(), b.constant_value(), &r)) return Overflow();
      return DimExpr(r);
    }
    if (a.IsConstant() && a.constant_value() == 0) return b;
    if (b.IsConstant() && b.constant_value() == 0) return a;
    Poly p = ToPoly(a);
    Poly q = ToPoly(b);
    p.insert(p.end(), std::make_move_iterator(q.begin()), std::make_move_iterator(q.end()));
    return FromPoly(std::move(p));
  }

  static DimExpr Scale(const DimExpr& a, int64_t k) {
    if (IsInvalid(a)) return a;
    if (k == 1) return a;
    if (k == 0) return DimExpr(0);
    Poly p = ToPoly(a);
    for (Term& t : p) {
      if (MulOverflows(t.coef, k, &t.coef)) return Overflow();
    }
    return FromPoly(std::move(p));
  }

  static DimExpr Mul(const DimExpr& a, const DimExpr& b) {
    if (IsInvalid(a)) return a;
    if (IsInvalid(b)) return b;
    if (b.IsConstant()) {
      if (a.IsConstant()) {
        int64_t r;
        if (MulOverflows(a.constant_value(), b.constant_value(), &r)) return Overflow();
        return DimExpr(r);
      }
      return Scale(a, b.constant_value());
    }
    if (a.IsConstant()) return Scale(b, a.constant_value());
    const Poly p = ToPoly(a);
    const Poly q = ToPoly(b);
    Poly r;
    r.reserve(p.size() * q.size());
    for (const Term& x : p) {
      for (const Term& y : q) {
        Term t;
        if (MulOverflows(x.coef, y.coef, &t.coef)) return Overflow();
        t.atoms.reserve(x.atoms.size() + y.atoms.size());
        std::merge(x.atoms.begin(), x.atoms.end(), y.atoms.begin(), y.atoms.end(),
                   std::back_inserter(t.atoms),
                   [](const Atom& u, const Atom& v) { return CompareAtoms(*u, *v) < 0; });
        r.push_back(std::move(t));
      }
    }
    return FromPoly(std::move(r));
  }

  // den's atoms removed from num's (multisets as sorted lists); nullopt when
  // num lacks one of them.
  static std::optional<std::vector<Atom>> DivideMonomial(const std::vector<Atom>& num,
                                                         const std::vector<Atom>& den) {
    std::vector<Atom> out;
    size_t j = 0;
    for (size_t i = 0; i < num.size(); ++i) {
      const int c = j < den.size() ? CompareAtoms(*num[i], *den[j]) : -1;
      if (c > 0) return std::nullopt;  // den[j] is not in num
      if (c == 0) {
        ++j;
      } else {
        out.push_back(num[i]);
      }
    }
    if (j != den.size()) return std::nullopt;
    return out;
  }

  // Q with a == b*Q as polynomials (so floor(a/b) = Q and a mod b = 0
  // wherever b != 0), for a non-constant b, by polynomial long division:
  // divide the remainder's leading term by b's (the term order is graded,
  // so the leading term drops at every step); nullopt when a term does not
  // divide or a remainder is left.
  static std::optional<DimExpr> ExactQuotient(const DimExpr& a, const DimExpr& b) {
    const DimNode* nb = b.node();
    if (!a.node() || !nb) return std::nullopt;
    const Term& lead = nb->terms.back();
    DimExpr q(0), r = a;
    for (size_t step = 0; step <= DimExpr::kMaxTerms; ++step) {
      if (IsInvalid(r) || IsInvalid(q)) return std::nullopt;
      const DimNode* nr = r.node();
      if (!nr) {
        if (r.constant_value() != 0) return std::nullopt;
        if (!(Mul(b, q) == a)) return std::nullopt;  // a == b*q, whatever the order
        return q;
      }
      const Term& t = nr->terms.back();
      if (lead.coef == -1 ? t.coef == kI64Min : t.coef % lead.coef != 0) return std::nullopt;
      std::optional<std::vector<Atom>> atoms = DivideMonomial(t.atoms, lead.atoms);
      if (!atoms) return std::nullopt;
      Poly p;
      p.push_back(Term{t.coef / lead.coef, std::move(*atoms)});
      const DimExpr qt = FromPoly(std::move(p));
      q = Add(q, qt);
      r = Add(r, Scale(Mul(b, qt), -1));
    }
    return std::nullopt;
  }

  static DimExpr FloorDiv(const DimExpr& a, const DimExpr& b) {
    if (IsInvalid(a)) return a;
    if (IsInvalid(b)) return b;
    if (!b.IsConstant()) {
      if (std::optional<DimExpr> q = ExactQuotient(a, b)) return *q;
      return FromAtom(MakeAtom(AtomKind::kFloorDiv, -1, a, b));
    }
    int64_t k = b.constant_value();
    if (k == 0) return FromAtom(MakeAtom(AtomKind::kFloorDiv, -1, a, b));
    if (k == 1) return a;
    if (a.IsConstant()) {
      int64_t q;
      if (!FloorDivChecked(a.constant_value(), k, &q)) return Overflow();
      return DimExpr(q);
    }
    if (k < 0) {
      if (k == kI64Min) return FromAtom(MakeAtom(AtomKind::kFloorDiv, -1, a, b));
      return FloorDiv(Scale(a, -1), DimExpr(-k));  // floor(a/b) = floor(-a/-b)
    }
    // k > 1. a = k*Q + R with R's coefficients and constant in [0, k):
    // floor(a/k) = Q + floor(R/k), and floor(R/k) = 0 when R is a constant.
    Poly quotient, rest;
    int64_t rest_constant = 0;
    for (const Term& t : ToPoly(a)) {
      int64_t q;
      FloorDivChecked(t.coef, k, &q);  // k > 1: cannot overflow
      const int64_t r = FloorMod(t.coef, k);
      if (q != 0) quotient.push_back(Term{q, t.atoms});
      if (r != 0) {
        if (t.atoms.empty()) {
          rest_constant = r;
        } else {
          rest.push_back(Term{r, t.atoms});
        }
      }
    }
    const DimExpr q = FromPoly(std::move(quotient));
    if (rest.empty()) return q;
    // floor((g*y + c)/(g*m)) = floor((y + floor(c/g))/m) for c in [0, g*m):
    // divide by the gcd of the divisor and the coefficients.
    int64_t g = k;
    for (const Term& t : rest) g = std::gcd(g, t.coef);
    if (g > 1) {
      for (Term& t : rest) t.coef /= g;
      rest_constant /= g;  // both non-negative: truncation is floor
      k /= g;
    }
    // floor((floor(x/d) + c)/k) = floor((x + c*d)/(d*k)) for d, k > 0.
    if (rest.size() == 1 && rest[0].coef == 1 && rest[0].atoms.size() == 1) {
      const AtomNode& inner = *rest[0].atoms[0];
      if (inner.kind == AtomKind::kFloorDiv && inner.b.IsConstant() && inner.b.constant_value() > 0) {
        const int64_t d = inner.b.constant_value();
        int64_t dk, cd;
        if (!MulOverflows(d, k, &dk) && !MulOverflows(rest_constant, d, &cd)) {
          return Add(q, FloorDiv(Add(inner.a, DimExpr(cd)), DimExpr(dk)));
        }
      }
    }
    if (rest_constant != 0) rest.push_back(Term{rest_constant, {}});
    return Add(q, FromAtom(MakeAtom(AtomKind::kFloorDiv, -1, FromPoly(std::move(rest)), DimExpr(k))));
  }

  static DimExpr Mod(const DimExpr& a, const DimExpr& b) {
    if (IsInvalid(a)) return a;
    if (IsInvalid(b)) return b;
    if (!b.IsConstant()) {
      if (ExactQuotient(a, b)) return DimExpr(0);
      return FromAtom(MakeAtom(AtomKind::kMod, -1, a, b));
    }
    const int64_t k = b.constant_value();
    if (k == 0) return FromAtom(MakeAtom(AtomKind::kMod, -1, a, b));
    if (a.IsConstant()) return DimExpr(FloorMod(a.constant_value(), k));
    if (k == 1 || k == -1) return DimExpr(0);
    if (k < 0) {
      if (k == kI64Min) return FromAtom(MakeAtom(AtomKind::kMod, -1, a, b));
      return Scale(Mod(Scale(a, -1), DimExpr(-k)), -1);  // a mod b = -((-a) mod -b)
    }
    // k > 1: (k*Q + R) mod k = R mod k; reduce every coefficient mod k.
    Poly rest;
    bool symbolic = false;
    for (const Term& t : ToPoly(a)) {
      const int64_t r = FloorMod(t.coef, k);
      if (r == 0) continue;
      rest.push_back(Term{r, t.atoms});
      symbolic |= !t.atoms.empty();
    }
    if (!symbolic) return DimExpr(rest.empty() ? 0 : rest[0].coef);
    return FromAtom(MakeAtom(AtomKind::kMod, -1, FromPoly(std::move(rest)), b));
  }

  static DimExpr MinMax(AtomKind kind, const DimExpr& a, const DimExpr& b) {
    if (IsInvalid(a)) return a;
    if (IsInvalid(b)) return b;
    // When a - b is a constant the answer is known whatever the symbols are.
    const DimExpr d = Add(a, Scale(b, -1));
    if (!IsInvalid(d) && d.IsConstant()) {
      const bool a_le_b = d.constant_value() <= 0;
      return (kind == AtomKind::kMin) == a_le_b ? a : b;
    }
    if (DimExpr::Compare(a, b) > 0) return FromAtom(MakeAtom(kind, -1, b, a));
    return FromAtom(MakeAtom(kind, -1, a, b));
  }
};

}  // namespace detail

using detail::Atom;
using detail::AtomKind;
using detail::AtomNode;
using detail::DimBuilder;
using detail::DimNode;
using detail::Term;

// ---------------------------------------------------------------------------
// Symbols

std::string SymbolDisplayName(std::string_view name) {
  bool plain = !name.empty() && !(name[0] >= '0' && name[0] <= '9');
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '_';
    plain &= ok;
  }
  if (plain) return std::string(name);
  std::string quoted;
  for (char ch : name) {
    if (ch == '"' || ch == '\\') quoted += '\\';
    quoted += ch;
  }
  return "\"" + EscapeForDisplay(quoted) + "\"";
}

Result<int> SymbolTable::Add(std::string name, int64_t lo, int64_t hi) {
  if (Find(name) >= 0) {
    return InvalidArgument("symbol " + SymbolDisplayName(name) + " is already defined");
  }
  if (lo > hi) {
    return InvalidArgument("symbol " + SymbolDisplayName(name) + ": range " + std::to_string(lo) +
                           ".." + std::to_string(hi) + " is empty (lo > hi)");
  }
  if (symbols_.size() >= static_cast<size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument("too many symbols");
  }
  symbols_.push_back(SymbolInfo{std::move(name), lo, hi});
  return static_cast<int>(symbols_.size() - 1);
}

int SymbolTable::Find(std::string_view name) const {
  for (size_t i = 0; i < symbols_.size(); ++i) {
    if (symbols_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Status SymbolTable::SetRange(int id, int64_t lo, int64_t hi) {
  if (id < 0 || static_cast<size_t>(id) >= symbols_.size()) {
    return InvalidArgument("no symbol with id " + std::to_string(id));
  }
  if (lo > hi) {
    return InvalidArgument("symbol " + SymbolDisplayName(symbols_[id].name) + ": range " +
                           std::to_string(lo) + ".." + std::to_string(hi) + " is empty (lo > hi)");
  }
  symbols_[id].lo = lo;
  symbols_[id].hi = hi;
  return Status::Ok();
}

DimExpr SymbolTable::Expr(int id) const { return DimExpr::Symbol(id); }

Status SymbolTable::CheckValues(std::span<const int64_t> values) const {
  if (values.size() != symbols_.size()) {
    return InvalidArgument(std::to_string(values.size()) + " symbol values for " +
                           std::to_string(symbols_.size()) + " symbols");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const SymbolInfo& s = symbols_[i];
    if (values[i] < s.lo || values[i] > s.hi) {
      return InvalidArgument("symbol " + SymbolDisplayName(s.name) + " = " + std::to_string(values[i]) +
                             " is outside its range " + std::to_string(s.lo) + ".." + std::to_string(s.hi));
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// DimExpr

DimExpr DimExpr::Symbol(int id) {
  if (id < 0) return DimBuilder::Invalid("negative symbol id " + std::to_string(id));
  return DimBuilder::FromAtom(DimBuilder::MakeAtom(AtomKind::kSymbol, id, DimExpr(), DimExpr()));
}

bool DimExpr::valid() const { return !DimBuilder::IsInvalid(*this); }

std::string DimExpr::error() const { return valid() ? std::string() : node_->error; }

int64_t DimExpr::size() const { return node_ ? node_->size : 1; }

size_t DimExpr::Hash() const { return node_ ? node_->hash : ConstantHash(constant_); }

int DimExpr::Compare(const DimExpr& a, const DimExpr& b) {
  const DimNode* x = a.node_.get();
  const DimNode* y = b.node_.get();
  if (x == y) {
    if (x) return 0;
    return a.constant_ == b.constant_ ? 0 : (a.constant_ < b.constant_ ? -1 : 1);
  }
  // Constants, then valid expressions, then invalid ones.
  const int rank_a = x ? (x->error.empty() ? 1 : 2) : 0;
  const int rank_b = y ? (y->error.empty() ? 1 : 2) : 0;
  if (rank_a != rank_b) return rank_a < rank_b ? -1 : 1;
  if (rank_a == 2) return x->error.compare(y->error);
  if (x->terms.size() != y->terms.size()) return x->terms.size() < y->terms.size() ? -1 : 1;
  for (size_t i = 0; i < x->terms.size(); ++i) {
    if (int c = detail::CompareMonomials(x->terms[i].atoms, y->terms[i].atoms)) return c;
    if (x->terms[i].coef != y->terms[i].coef) return x->terms[i].coef < y->terms[i].coef ? -1 : 1;
  }
  if (x->constant != y->constant) return x->constant < y->constant ? -1 : 1;
  return 0;
}

bool DimExpr::operator==(const DimExpr& other) const {
  if (node_ == other.node_) return node_ || constant_ == other.constant_;
  if (Hash() != other.Hash()) return false;
  return Compare(*this, other) == 0;
}

DimExpr operator+(const DimExpr& a, const DimExpr& b) { return DimBuilder::Add(a, b); }
DimExpr operator-(const DimExpr& a, const DimExpr& b) {
  return DimBuilder::Add(a, DimBuilder::Scale(b, -1));
}
DimExpr operator*(const DimExpr& a, const DimExpr& b) { return DimBuilder::Mul(a, b); }
DimExpr operator-(const DimExpr& a) { return DimBuilder::Scale(a, -1); }
DimExpr FloorDiv(const DimExpr& a, const DimExpr& b) { return DimBuilder::FloorDiv(a, b); }
DimExpr CeilDiv(const DimExpr& a, const DimExpr& b) {
  // ceil(a/k) = floor((a + k - 1)/k) for k > 0: the form FloorDiv keeps.
  if (b.IsConstant() && b.constant_value() > 0) {
    return DimBuilder::FloorDiv(DimBuilder::Add(a, DimExpr(b.constant_value() - 1)), b);
  }
  return DimBuilder::Scale(DimBuilder::FloorDiv(DimBuilder::Scale(a, -1), b), -1);
}
DimExpr Mod(const DimExpr& a, const DimExpr& b) { return DimBuilder::Mod(a, b); }
DimExpr Min(const DimExpr& a, const DimExpr& b) { return DimBuilder::MinMax(AtomKind::kMin, a, b); }
DimExpr Max(const DimExpr& a, const DimExpr& b) { return DimBuilder::MinMax(AtomKind::kMax, a, b); }

// ---- Printing

namespace {

class Printer {
 public:
  Printer(const SymbolTable* symbols, size_t max_chars) : symbols_(symbols), max_(max_chars) {}

  // parens: wrap a sum of more than one part (or a negative constant) in ( ).
  void Expr(const DimExpr& e, bool parens) {
    if (Full()) return;
    const DimNode* n = e.node();
    if (!n) {
      const int64_t c = e.constant_value();
      if (parens && c < 0) {
        Put("(" + std::to_string(c) + ")");
      } else {
        Put(std::to_string(c));
      }
      return;
    }
    if (!n->error.empty()) {
      Put("<invalid: " + n->error + ">");
      return;
    }
    const size_t parts = n->terms.size() + (n->constant != 0 ? 1 : 0);
    const bool wrap = parens && (parts > 1 || n->terms[0].coef != 1);
    if (wrap) Put("(");
    for (size_t i = 0; i < n->terms.size() && !Full(); ++i) {
      const Term& t = n->terms[i];
      if (t.coef == -1) {
        Put("-");
      } else if (t.coef < 0) {
        Put(std::to_string(t.coef) + "*");
      } else {
        if (i > 0) Put("+");
        if (t.coef != 1) Put(std::to_string(t.coef) + "*");
      }
      for (size_t j = 0; j < t.atoms.size(); ++j) {
        if (j > 0) Put("*");
        Atom(*t.atoms[j]);
      }
    }
    if (n->constant > 0) Put("+" + std::to_string(n->constant));
    if (n->constant < 0) Put(std::to_string(n->constant));
    if (wrap) Put(")");
  }

  std::string Finish() {
    if (out_.size() > max_) {
      out_.resize(max_);
      out_ += "...";
    }
    return std::move(out_);
  }

 private:
  bool Full() const { return out_.size() > max_; }
  void Put(const std::string& s) {
    if (!Full()) out_ += s;
  }

  void Atom(const AtomNode& a) {
    if (Full()) return;
    switch (a.kind) {
      case AtomKind::kSymbol:
        if (symbols_ && static_cast<size_t>(a.symbol) < symbols_->size()) {
          Put(SymbolDisplayName((*symbols_)[a.symbol].name));
        } else {
          Put("$" + std::to_string(a.symbol));
        }
        return;
      case AtomKind::kFloorDiv:
        Put("floor(");
        Expr(a.a, true);
        Put("/");
        Expr(a.b, true);
        Put(")");
        return;
      case AtomKind::kMod:
      case AtomKind::kMin:
      case AtomKind::kMax:
        Put(a.kind == AtomKind::kMod ? "mod(" : a.kind == AtomKind::kMin ? "min(" : "max(");
        Expr(a.a, false);
        Put(",");
        Expr(a.b, false);
        Put(")");
        return;
    }
  }

  const SymbolTable* symbols_;
  size_t max_;
  std::string out_;
};

}  // namespace

std::string DimExpr::ToString(const SymbolTable* symbols, size_t max_chars) const {
  Printer p(symbols, max_chars);
  p.Expr(*this, false);
  return p.Finish();
}

std::string SymShapeToString(const SymShape& s, const SymbolTable* symbols) {
  if (s.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += "x";
    const DimNode* n = s[i].node();
    const bool bare = !n || (n->error.empty() && n->constant == 0 && n->terms.size() == 1 &&
                             n->terms[0].coef == 1 && n->terms[0].atoms.size() == 1 &&
                             n->terms[0].atoms[0]->kind == AtomKind::kSymbol);
    if (!bare) out += '(';
    out += s[i].ToString(symbols);
    if (!bare) out += ')';
  }
  return out;
}

SymShape ToSymShape(const std::vector<int64_t>& shape) { return SymShape(shape.begin(), shape.end()); }

std::optional<std::vector<int64_t>> StaticShape(const SymShape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const DimExpr& d : s) {
    if (!d.IsConstant()) return std::nullopt;
    out.push_back(d.constant_value());
  }
  return out;
}

DimExpr SymNumElements(const SymShape& s) {
  DimExpr n(1);
  for (const DimExpr& d : s) n = n * d;
  return n;
}

// ---- Symbols, evaluation and bounds

namespace {

void CollectSymbols(const DimExpr& e, std::unordered_set<const AtomNode*>* seen, std::vector<int>* out) {
  const DimNode* n = e.node();
  if (!n) return;
  for (const Term& t : n->terms) {
    for (const Atom& a : t.atoms) {
      if (!seen->insert(a.get()).second) continue;
      if (a->kind == AtomKind::kSymbol) {
        out->push_back(a->symbol);
      } else {
        CollectSymbols(a->a, seen, out);
        CollectSymbols(a->b, seen, out);
      }
    }
  }
}

// Evaluates in the order DimProgram::Compile emits (terms left to right, the
// constant last; factors left to right, the coefficient last), so both give
// the same values and the same errors.
Status Eval(const DimExpr& e, std::span<const int64_t> v, int64_t* out);

Status EvalAtom(const AtomNode& a, std::span<const int64_t> v, int64_t* out) {
  if (a.kind == AtomKind::kSymbol) {
    if (static_cast<size_t>(a.symbol) >= v.size()) {
      return InvalidArgument("dimension expression reads symbol $" + std::to_string(a.symbol) + " but " +
                             std::to_string(v.size()) + " symbol values were given");
    }
    *out = v[a.symbol];
    return Status::Ok();
  }
  int64_t x, y;
  FCB_RETURN_IF_ERROR(Eval(a.a, v, &x));
  FCB_RETURN_IF_ERROR(Eval(a.b, v, &y));
  switch (a.kind) {
    case AtomKind::kFloorDiv:
    case AtomKind::kMod:
      if (y == 0) return InvalidArgument("dimension expression: division by zero");
      if (a.kind == AtomKind::kMod) {
        *out = FloorMod(x, y);
      } else if (!FloorDivChecked(x, y, out)) {
        return InvalidArgument("dimension expression: integer overflow (int64) in a division");
      }
      return Status::Ok();
    case AtomKind::kMin: *out = std::min(x, y); return Status::Ok();
    case AtomKind::kMax: *out = std::max(x, y); return Status::Ok();
    case AtomKind::kSymbol: break;
  }
  return Internal("dimension expression: unknown atom kind");
}

Status Eval(const DimExpr& e, std::span<const int64_t> v, int64_t* out) {
  const DimNode* n = e.node();
  if (!n) {
    *out = e.constant_value();
    return Status::Ok();
  }
  if (!n->error.empty()) return InvalidArgument(n->error);
  int64_t acc = 0;
  for (size_t i = 0; i < n->terms.size(); ++i) {
    const Term& t = n->terms[i];
    int64_t p = 0;
    for (size_t j = 0; j < t.atoms.size(); ++j) {
      int64_t x = 0;
      FCB_RETURN_IF_ERROR(EvalAtom(*t.atoms[j], v, &x));
      if (j == 0) {
        p = x;
      } else if (MulOverflows(p, x, &p)) {
        return InvalidArgument("dimension expression: integer overflow (int64) in a product");
      }
    }
    if (t.coef != 1 && MulOverflows(p, t.coef, &p)) {
      return InvalidArgument("dimension expression: integer overflow (int64) in a product");
    }
    if (i == 0) {
      acc = p;
    } else if (AddOverflows(acc, p, &acc)) {
      return InvalidArgument("dimension expression: integer overflow (int64) in a sum");
    }
  }
  if (n->constant != 0 && AddOverflows(acc, n->constant, &acc)) {
    return InvalidArgument("dimension expression: integer overflow (int64) in a sum");
  }
  *out = acc;
  return Status::Ok();
}

Status BoundsOverflow() {
  return InvalidArgument("dimension expression: a bound overflows int64");
}

Status MulRange(DimRange x, DimRange y, DimRange* out) {
  const int64_t c[4][2] = {{x.lo, y.lo}, {x.lo, y.hi}, {x.hi, y.lo}, {x.hi, y.hi}};
  int64_t lo = kI64Max, hi = kI64Min;
  for (const auto& p : c) {
    int64_t r;
    if (MulOverflows(p[0], p[1], &r)) return BoundsOverflow();
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  *out = DimRange{lo, hi};
  return Status::Ok();
}

Status Range(const DimExpr& e, const SymbolTable& t, DimRange* out);

// The parts of a divisor range without zero.
int NonZeroPieces(DimRange b, DimRange pieces[2]) {
  int n = 0;
  if (b.lo <= -1) pieces[n++] = DimRange{b.lo, std::min<int64_t>(b.hi, -1)};
  if (b.hi >= 1) pieces[n++] = DimRange{std::max<int64_t>(b.lo, 1), b.hi};
  return n;
}

Status AtomRange(const AtomNode& a, const SymbolTable& t, DimRange* out) {
  if (a.kind == AtomKind::kSymbol) {
    if (static_cast<size_t>(a.symbol) >= t.size()) {
      return InvalidArgument("dimension expression reads symbol $" + std::to_string(a.symbol) +
                             ", which is not in the symbol table (" + std::to_string(t.size()) + " symbols)");
    }
    *out = DimRange{t[a.symbol].lo, t[a.symbol].hi};
    return Status::Ok();
  }
  DimRange x, y;
  FCB_RETURN_IF_ERROR(Range(a.a, t, &x));
  FCB_RETURN_IF_ERROR(Range(a.b, t, &y));
  if (a.kind == AtomKind::kMin) {
    *out = DimRange{std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
    return Status::Ok();
  }
  if (a.kind == AtomKind::kMax) {
    *out = DimRange{std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
    return Status::Ok();
  }
  DimRange pieces[2];
  const int np = NonZeroPieces(y, pieces);
  if (np == 0) return InvalidArgument("dimension expression: a divisor is always zero");
  int64_t lo = kI64Max, hi = kI64Min;
  for (int i = 0; i < np; ++i) {
    const DimRange d = pieces[i];
    if (a.kind == AtomKind::kFloorDiv) {
      // With the divisor of one sign, x/d is monotonic in x and in d, so the
      // extremes of floor(x/d) lie at the corners.
      const int64_t c[4][2] = {{x.lo, d.lo}, {x.lo, d.hi}, {x.hi, d.lo}, {x.hi, d.hi}};
      for (const auto& p : c) {
        int64_t q;
        if (!FloorDivChecked(p[0], p[1], &q)) return BoundsOverflow();
        lo = std::min(lo, q);
        hi = std::max(hi, q);
      }
      continue;
    }
    // Mod: the sign of the divisor, magnitude below |divisor|.
    int64_t mlo, mhi;
    if (d.lo == d.hi) {
      const int64_t k = d.lo;
      int64_t qlo, qhi;
      const bool qok = FloorDivChecked(x.lo, k, &qlo) && FloorDivChecked(x.hi, k, &qhi);
      if (qok && qlo == qhi) {
        // One quotient block: x mod k = x - k*q increases with x.
        lo = std::min(lo, FloorMod(x.lo, k));
        hi = std::max(hi, FloorMod(x.hi, k));
        continue;
      }
    }
    if (d.lo > 0) {
      mlo = 0;
      mhi = d.hi - 1;
      if (x.lo >= 0) mhi = std::min(mhi, x.hi);  // 0 <= x mod d <= x
    } else {
      mlo = d.lo + 1;
      mhi = 0;
      if (x.hi <= 0) mlo = std::max(mlo, x.lo);  // x <= x mod d <= 0
    }
    lo = std::min(lo, mlo);
    hi = std::max(hi, mhi);
  }
  *out = DimRange{lo, hi};
  return Status::Ok();
}

Status Range(const DimExpr& e, const SymbolTable& t, DimRange* out) {
  const DimNode* n = e.node();
  if (!n) {
    *out = DimRange{e.constant_value(), e.constant_value()};
    return Status::Ok();
  }
  if (!n->error.empty()) return InvalidArgument(n->error);
  DimRange acc{n->constant, n->constant};
  for (const Term& term : n->terms) {
    DimRange p{term.coef, term.coef};
    for (const Atom& a : term.atoms) {
      DimRange r;
      FCB_RETURN_IF_ERROR(AtomRange(*a, t, &r));
      FCB_RETURN_IF_ERROR(MulRange(p, r, &p));
    }
    if (AddOverflows(acc.lo, p.lo, &acc.lo) || AddOverflows(acc.hi, p.hi, &acc.hi)) {
      return BoundsOverflow();
    }
  }
  *out = acc;
  return Status::Ok();
}

}  // namespace

Result<int64_t> DimExpr::Evaluate(std::span<const int64_t> symbol_values) const {
  int64_t v = 0;
  Status s = Eval(*this, symbol_values, &v);
  if (!s.ok()) {
    if (valid()) s.Annotate("in " + ToString(nullptr, 200));
    return s;
  }
  return v;
}

Result<DimRange> DimExpr::Bounds(const SymbolTable& symbols) const {
  DimRange r;
  Status s = Range(*this, symbols, &r);
  if (!s.ok()) {
    if (valid()) s.Annotate("bounds of " + ToString(&symbols, 200));
    return s;
  }
  return r;
}

namespace {

// Rebuilds an expression atom by atom, resolving the atoms the symbol ranges
// decide (DimExpr::Simplify). Atoms are memoised: a shared subexpression is
// rewritten once.
class RangeSimplifier {
 public:
  explicit RangeSimplifier(const SymbolTable& t) : t_(t) {}

  DimExpr Expr(const DimExpr& e) {
    const DimNode* n = e.node();
    if (!n || !n->error.empty()) return e;
    DimExpr sum(n->constant);
    for (const Term& term : n->terms) {
      DimExpr p(term.coef);
      for (const Atom& a : term.atoms) p = p * AtomExpr(a);
      sum = sum + p;
    }
    return sum;
  }

 private:
  std::optional<DimRange> RangeOf(const DimExpr& e) {
    DimRange r;
    if (!Range(e, t_, &r).ok()) return std::nullopt;
    return r;
  }

  DimExpr AtomExpr(const Atom& a) {
    if (auto it = memo_.find(a.get()); it != memo_.end()) return it->second;
    DimExpr out = Rewrite(*a);
    memo_.emplace(a.get(), out);
    return out;
  }

  DimExpr Rewrite(const AtomNode& a) {
    if (a.kind == AtomKind::kSymbol) return DimExpr::Symbol(a.symbol);
    const DimExpr x = Expr(a.a);
    const DimExpr y = Expr(a.b);
    switch (a.kind) {
      case AtomKind::kMin:
      case AtomKind::kMax: {
        const std::optional<DimRange> rx = RangeOf(x), ry = RangeOf(y);
        if (rx && ry) {
          const bool x_le_y = rx->hi <= ry->lo, y_le_x = ry->hi <= rx->lo;
          if (x_le_y) return a.kind == AtomKind::kMin ? x : y;
          if (y_le_x) return a.kind == AtomKind::kMin ? y : x;
        }
        return a.kind == AtomKind::kMin ? Min(x, y) : Max(x, y);
      }
      case AtomKind::kFloorDiv:
      case AtomKind::kMod: {
        const DimExpr whole = a.kind == AtomKind::kFloorDiv ? FloorDiv(x, y) : Mod(x, y);
        if (!y.IsConstant() || y.constant_value() <= 0) return whole;
        const int64_t k = y.constant_value();
        const std::optional<DimRange> rx = RangeOf(x);
        int64_t qlo, qhi;
        if (!rx || !FloorDivChecked(rx->lo, k, &qlo) || !FloorDivChecked(rx->hi, k, &qhi) || qlo != qhi) {
          return whole;
        }
        // x stays in [q*k, q*k + k - 1]: floor(x/k) = q, x mod k = x - q*k.
        if (a.kind == AtomKind::kFloorDiv) return DimExpr(qlo);
        const DimExpr rest = x - DimExpr(qlo) * k;
        return rest.valid() ? rest : whole;
      }
      case AtomKind::kSymbol: break;
    }
    return DimExpr::Symbol(a.symbol);
  }

  const SymbolTable& t_;
  std::unordered_map<const AtomNode*, DimExpr> memo_;
};

}  // namespace

DimExpr DimExpr::Simplify(const SymbolTable& symbols) const {
  for (int id : Symbols()) {
    if (static_cast<size_t>(id) >= symbols.size()) return *this;
  }
  return RangeSimplifier(symbols).Expr(*this);
}

std::vector<int> DimExpr::Symbols() const {
  std::unordered_set<const AtomNode*> seen;
  std::vector<int> ids;
  CollectSymbols(*this, &seen, &ids);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// ---------------------------------------------------------------------------
// DimProgram

namespace {

using Op = DimProgram::Op;

const char* OpName(Op op) {
  switch (op) {
    case Op::kConst: return "const";
    case Op::kSymbol: return "symbol";
    case Op::kAdd: return "add";
    case Op::kMul: return "mul";
    case Op::kAddK: return "add-constant";
    case Op::kMulK: return "mul-constant";
    case Op::kFloorDiv: return "floordiv";
    case Op::kFloorDivK: return "floordiv-constant";
    case Op::kMod: return "mod";
    case Op::kModK: return "mod-constant";
    case Op::kMin: return "min";
    case Op::kMax: return "max";
  }
  return "?";
}

constexpr size_t kHeaderWords = 3;

class ProgramBuilder {
 public:
  explicit ProgramBuilder(size_t num_symbols) : num_symbols_(num_symbols) {}

  Status Expr(const DimExpr& e, int64_t* slot) {
    const DimNode* n = e.node();
    if (!n) return Emit(Op::kConst, e.constant_value(), 0, slot);
    if (!n->error.empty()) return InvalidArgument(n->error);
    if (auto it = node_slots_.find(n); it != node_slots_.end()) {
      *slot = it->second;
      return Status::Ok();
    }
    int64_t acc = 0;
    for (size_t i = 0; i < n->terms.size(); ++i) {
      const Term& t = n->terms[i];
      int64_t p = 0;
      for (size_t j = 0; j < t.atoms.size(); ++j) {
        int64_t x;
        FCB_RETURN_IF_ERROR(AtomSlot(*t.atoms[j], &x));
        if (j == 0) {
          p = x;
        } else {
          FCB_RETURN_IF_ERROR(Emit(Op::kMul, p, x, &p));
        }
      }
      if (t.coef != 1) FCB_RETURN_IF_ERROR(Emit(Op::kMulK, p, t.coef, &p));
      if (i == 0) {
        acc = p;
      } else {
        FCB_RETURN_IF_ERROR(Emit(Op::kAdd, acc, p, &acc));
      }
    }
    if (n->constant != 0) FCB_RETURN_IF_ERROR(Emit(Op::kAddK, acc, n->constant, &acc));
    node_slots_.emplace(n, acc);
    *slot = acc;
    return Status::Ok();
  }

  std::vector<int64_t> Words(const std::vector<int64_t>& outputs) const {
    std::vector<int64_t> w;
    w.reserve(kHeaderWords + outputs.size() + 3 * code_.size());
    w.push_back(DimProgram::kMagic);
    w.push_back(static_cast<int64_t>(code_.size()));
    w.push_back(static_cast<int64_t>(outputs.size()));
    w.insert(w.end(), outputs.begin(), outputs.end());
    for (const auto& [op, x, y] : code_) {
      w.push_back(static_cast<int64_t>(op));
      w.push_back(x);
      w.push_back(y);
    }
    return w;
  }

 private:
  struct Key {
    Op op;
    int64_t x, y;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return Mix(Mix(static_cast<size_t>(k.op), static_cast<uint64_t>(k.x)), static_cast<uint64_t>(k.y));
    }
  };

  Status AtomSlot(const AtomNode& a, int64_t* slot) {
    if (auto it = atom_slots_.find(&a); it != atom_slots_.end()) {
      *slot = it->second;
      return Status::Ok();
    }
    if (a.kind == AtomKind::kSymbol) {
      if (static_cast<size_t>(a.symbol) >= num_symbols_) {
        return InvalidArgument("dimension expression reads symbol $" + std::to_string(a.symbol) +
                               " but the program has " + std::to_string(num_symbols_) + " symbols");
      }
      FCB_RETURN_IF_ERROR(Emit(Op::kSymbol, a.symbol, 0, slot));
    } else {
      int64_t x;
      FCB_RETURN_IF_ERROR(Expr(a.a, &x));
      const bool positive_k = a.b.IsConstant() && a.b.constant_value() > 0;
      if (positive_k && (a.kind == AtomKind::kFloorDiv || a.kind == AtomKind::kMod)) {
        FCB_RETURN_IF_ERROR(Emit(a.kind == AtomKind::kFloorDiv ? Op::kFloorDivK : Op::kModK, x,
                                 a.b.constant_value(), slot));
      } else {
        int64_t y;
        FCB_RETURN_IF_ERROR(Expr(a.b, &y));
        const Op op = a.kind == AtomKind::kFloorDiv ? Op::kFloorDiv
                      : a.kind == AtomKind::kMod    ? Op::kMod
                      : a.kind == AtomKind::kMin    ? Op::kMin
                                                    : Op::kMax;
        FCB_RETURN_IF_ERROR(Emit(op, x, y, slot));
      }
    }
    atom_slots_.emplace(&a, *slot);
    return Status::Ok();
  }

  // Value numbering: an instruction already emitted is reused.
  Status Emit(Op op, int64_t x, int64_t y, int64_t* slot) {
    if ((op == Op::kAdd || op == Op::kMul || op == Op::kMin || op == Op::kMax) && y < x) std::swap(x, y);
    const Key key{op, x, y};
    if (auto it = seen_.find(key); it != seen_.end()) {
      *slot = it->second;
      return Status::Ok();
    }
    if (code_.size() >= DimProgram::kMaxInstructions) {
      return InvalidArgument("dimension program would have more than " +
                             std::to_string(DimProgram::kMaxInstructions) + " instructions");
    }
    *slot = static_cast<int64_t>(code_.size());
    code_.push_back(key);
    seen_.emplace(key, *slot);
    return Status::Ok();
  }

  size_t num_symbols_;
  std::vector<Key> code_;
  std::unordered_map<Key, int64_t, KeyHash> seen_;
  std::unordered_map<const DimNode*, int64_t> node_slots_;
  std::unordered_map<const AtomNode*, int64_t> atom_slots_;
};

}  // namespace

Result<DimProgram> DimProgram::Compile(std::span<const DimExpr> exprs, size_t num_symbols) {
  if (exprs.size() > kMaxOutputs) {
    return InvalidArgument("dimension program: " + std::to_string(exprs.size()) + " outputs, more than " +
                           std::to_string(kMaxOutputs));
  }
  ProgramBuilder b(num_symbols);
  std::vector<int64_t> outputs(exprs.size());
  for (size_t i = 0; i < exprs.size(); ++i) {
    Status s = b.Expr(exprs[i], &outputs[i]);
    if (!s.ok()) return std::move(s).Annotate("dimension program output " + std::to_string(i));
  }
  const std::vector<int64_t> words = b.Words(outputs);
  Result<DimProgram> p = Decode(words.data(), words.size(), num_symbols);
  if (!p.ok()) return Internal("dimension program fails its own verification: " + p.status().message());
  return p;
}

Result<DimProgram> DimProgram::Decode(const int64_t* words, size_t n, size_t num_symbols) {
  auto bad = [](const std::string& what) { return CorruptFile("dimension program: " + what); };
  if (n < kHeaderWords || words == nullptr) {
    return bad(std::to_string(n) + " words, fewer than its " + std::to_string(kHeaderWords) + "-word header");
  }
  if (words[0] != kMagic) return bad("bad magic word " + std::to_string(words[0]));
  const int64_t ni = words[1], no = words[2];
  if (ni < 0 || static_cast<uint64_t>(ni) > kMaxInstructions) {
    return bad(std::to_string(ni) + " instructions (at most " + std::to_string(kMaxInstructions) + ")");
  }
  if (no < 0 || static_cast<uint64_t>(no) > kMaxOutputs) {
    return bad(std::to_string(no) + " outputs (at most " + std::to_string(kMaxOutputs) + ")");
  }
  const size_t expected = kHeaderWords + static_cast<size_t>(no) + 3 * static_cast<size_t>(ni);
  if (n != expected) {
    return bad(std::to_string(n) + " words, its header says " + std::to_string(expected) + " (" +
               std::to_string(ni) + " instructions, " + std::to_string(no) + " outputs)");
  }
  DimProgram p;
  p.num_symbols_ = num_symbols;
  p.outputs_.assign(words + kHeaderWords, words + kHeaderWords + no);
  for (size_t i = 0; i < p.outputs_.size(); ++i) {
    if (p.outputs_[i] < 0 || p.outputs_[i] >= ni) {
      return bad("output " + std::to_string(i) + " refers to slot " + std::to_string(p.outputs_[i]) + " of " +
                 std::to_string(ni));
    }
  }
  p.code_.resize(static_cast<size_t>(ni));
  const int64_t* w = words + kHeaderWords + no;
  for (int64_t i = 0; i < ni; ++i, w += 3) {
    const int64_t op = w[0], x = w[1], y = w[2];
    const std::string where = "instruction " + std::to_string(i);
    if (op < static_cast<int64_t>(Op::kConst) || op > static_cast<int64_t>(Op::kMax)) {
      return bad(where + ": unknown opcode " + std::to_string(op));
    }
    const Op o = static_cast<Op>(op);
    auto earlier = [&](int64_t ref, const char* which) -> Status {
      if (ref >= 0 && ref < i) return Status::Ok();
      return bad(where + " (" + OpName(o) + "): operand " + which + " = " + std::to_string(ref) +
                 " is not an earlier slot");
    };
    switch (o) {
      case Op::kConst:
        if (y != 0) return bad(where + " (const): unused operand is " + std::to_string(y) + ", not 0");
        break;
      case Op::kSymbol:
        if (x < 0 || static_cast<uint64_t>(x) >= num_symbols) {
          return bad(where + " (symbol): symbol id " + std::to_string(x) + " is not one of the " +
                     std::to_string(num_symbols) + " symbols");
        }
        if (y != 0) return bad(where + " (symbol): unused operand is " + std::to_string(y) + ", not 0");
        break;
      case Op::kAddK:
      case Op::kMulK: FCB_RETURN_IF_ERROR(earlier(x, "x")); break;
      case Op::kFloorDivK:
      case Op::kModK:
        FCB_RETURN_IF_ERROR(earlier(x, "x"));
        if (y <= 0) return bad(where + " (" + OpName(o) + "): constant divisor " + std::to_string(y) + " <= 0");
        break;
      default:
        FCB_RETURN_IF_ERROR(earlier(x, "x"));
        FCB_RETURN_IF_ERROR(earlier(y, "y"));
        break;
    }
    p.code_[i] = Instr{o, x, y};
  }
  p.words_.assign(words, words + n);
  return p;
}

namespace {

[[gnu::cold, gnu::noinline]] Status ProgramError(size_t i, Op op, const char* what) {
  return InvalidArgument("dimension program instruction " + std::to_string(i) + " (" + OpName(op) + "): " + what);
}

}  // namespace

Status DimProgram::Evaluate(std::span<const int64_t> symbol_values, std::span<int64_t> scratch,
                            std::span<int64_t> outputs) const {
  if (outputs.size() < outputs_.size()) {
    return InvalidArgument("dimension program: " + std::to_string(outputs.size()) + " outputs given; it has " +
                           std::to_string(outputs_.size()));
  }
  FCB_RETURN_IF_ERROR(Evaluate(symbol_values, scratch));
  const int64_t* s = scratch.data();
  for (size_t j = 0; j < outputs_.size(); ++j) outputs[j] = s[outputs_[j]];
  return Status::Ok();
}

Status DimProgram::Evaluate(std::span<const int64_t> symbol_values, std::span<int64_t> scratch) const {
  if (symbol_values.size() < num_symbols_ || scratch.size() < code_.size()) {
    return InvalidArgument("dimension program: " + std::to_string(symbol_values.size()) + " symbol values and " +
                           std::to_string(scratch.size()) + " scratch slots given; it needs " +
                           std::to_string(num_symbols_) + " and " + std::to_string(code_.size()));
  }
  int64_t* s = scratch.data();
  const int64_t* sym = symbol_values.data();
  const size_t n = code_.size();
  for (size_t i = 0; i < n; ++i) {
    const Instr& in = code_[i];
    int64_t r = 0;
    switch (in.op) {
      case Op::kConst: r = in.x; break;
      case Op::kSymbol: r = sym[in.x]; break;
      case Op::kAdd:
        if (AddOverflows(s[in.x], s[in.y], &r)) return ProgramError(i, in.op, "integer overflow (int64)");
        break;
      case Op::kMul:
        if (MulOverflows(s[in.x], s[in.y], &r)) return ProgramError(i, in.op, "integer overflow (int64)");
        break;
      case Op::kAddK:
        if (AddOverflows(s[in.x], in.y, &r)) return ProgramError(i, in.op, "integer overflow (int64)");
        break;
      case Op::kMulK:
        if (MulOverflows(s[in.x], in.y, &r)) return ProgramError(i, in.op, "integer overflow (int64)");
        break;
      case Op::kFloorDiv:
        if (s[in.y] == 0) return ProgramError(i, in.op, "division by zero");
        if (!FloorDivChecked(s[in.x], s[in.y], &r)) return ProgramError(i, in.op, "integer overflow (int64)");
        break;
      case Op::kFloorDivK: FloorDivChecked(s[in.x], in.y, &r); break;  // y > 0: cannot overflow
      case Op::kMod:
        if (s[in.y] == 0) return ProgramError(i, in.op, "division by zero");
        r = FloorMod(s[in.x], s[in.y]);
        break;
      case Op::kModK: r = FloorMod(s[in.x], in.y); break;
      case Op::kMin: r = std::min(s[in.x], s[in.y]); break;
      case Op::kMax: r = std::max(s[in.x], s[in.y]); break;
      default: return ProgramError(i, in.op, "unknown opcode");
    }
    s[i] = r;
  }
  return Status::Ok();
}

}  // namespace fcb::ir
