#include "format/metadata.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "fcb_generated.h"
#include "fcb/limits.h"
#include "format/fcb_header.h"

namespace fcb::format {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// Shared strings: tensor and op names repeat in every target's context, and
// sharing them keeps an extra target cheap. Still deterministic.
Offset<flatbuffers::String> Str(FlatBufferBuilder& fbb, const std::string& s) {
  return fbb.CreateSharedString(s);
}

Offset<fb::Step> EncodeStep(FlatBufferBuilder& fbb, const StepDesc& s) {
  std::vector<Offset<fb::Attr>> attrs;
  for (const AttrDesc& a : s.attrs) {
    auto name = Str(fbb, a.name);
    // Empty lists and strings are left out; absent reads back as empty.
    auto ints = a.ints.empty() ? 0 : fbb.CreateVector(a.ints);
    auto floats = a.floats.empty() ? 0 : fbb.CreateVector(a.floats);
    auto str = a.str.empty() ? 0 : Str(fbb, a.str);
    attrs.push_back(fb::CreateAttr(fbb, name, ints, floats, str));
  }
  auto op = Str(fbb, s.op);
  auto node = Str(fbb, s.node);
  auto inputs = fbb.CreateVector(s.inputs);
  auto outputs = fbb.CreateVector(s.outputs);
  auto attr_vec = attrs.empty() ? 0 : fbb.CreateVector(attrs);
  auto guard = s.guard.empty() ? 0 : fbb.CreateVector(s.guard);
  return fb::CreateStep(fbb, op, node, inputs, outputs, attr_vec, guard);
}

// Plans that are equal in every field are written once: a context whose
// tensor or step list equals an earlier context's refers to that list (the
// lowering rules are target-neutral, so every target of a method usually has
// the same plan and an extra target costs its Context table, about a hundred
// bytes). FlatBuffers allows shared subobjects; readers see no difference.
struct PlanCache {
  std::vector<std::pair<const std::vector<TensorDesc>*, Offset<flatbuffers::Vector<Offset<fb::Tensor>>>>> tensors;
  std::vector<std::pair<const std::vector<StepDesc>*, Offset<flatbuffers::Vector<Offset<fb::Step>>>>> steps;
};

// The offset written for a list equal to `v`, if any.
template <typename T, typename O>
const O* Written(const std::vector<std::pair<const T*, O>>& cache, const T& v) {
  for (const auto& [list, off] : cache)
    if (*list == v) return &off;
  return nullptr;
}

Offset<fb::Context> EncodeContext(FlatBufferBuilder& fbb, const ContextDesc& c, PlanCache& cache) {
  Offset<flatbuffers::Vector<Offset<fb::Tensor>>> tensor_vec;
  if (const auto* w = Written(cache.tensors, c.tensors)) {
    tensor_vec = *w;
  } else {
    std::vector<Offset<fb::Tensor>> tensors;
    for (const TensorDesc& t : c.tensors) {
      auto name = Str(fbb, t.name);
      auto shape = fbb.CreateVector(t.shape);
      tensors.push_back(fb::CreateTensor(fbb, name, static_cast<int32_t>(t.dtype), shape,
                                         static_cast<fb::Storage>(t.storage), t.offset, t.blob));
    }
    tensor_vec = fbb.CreateVector(tensors);
    cache.tensors.emplace_back(&c.tensors, tensor_vec);
  }
  Offset<flatbuffers::Vector<Offset<fb::Step>>> step_vec;
  if (const auto* w = Written(cache.steps, c.steps)) {
    step_vec = *w;
  } else {
    std::vector<Offset<fb::Step>> steps;
    for (const StepDesc& s : c.steps) steps.push_back(EncodeStep(fbb, s));
    step_vec = fbb.CreateVector(steps);
    cache.steps.emplace_back(&c.steps, step_vec);
  }
  auto method = Str(fbb, c.method);
  auto target = Str(fbb, c.target);
  auto options = Str(fbb, c.options);
  auto inputs = fbb.CreateVector(c.inputs);
  auto outputs = fbb.CreateVector(c.outputs);
  Offset<flatbuffers::Vector<Offset<fb::Symbol>>> symbols = 0;
  Offset<flatbuffers::Vector<int32_t>> input_symbols = 0;
  if (c.dynamic()) {
    std::vector<Offset<fb::Symbol>> syms;
    for (const auto& sym : c.symbols) syms.push_back(fb::CreateSymbol(fbb, Str(fbb, sym.name), sym.lo, sym.hi));
    symbols = fbb.CreateVector(syms);
    input_symbols = fbb.CreateVector(c.input_symbols);
  }
  Offset<flatbuffers::Vector<const fb::StateBinding*>> state = 0;
  if (!c.state.empty()) {
    std::vector<fb::StateBinding> st;
    for (const auto& b : c.state) st.emplace_back(b.input, b.output);
    state = fbb.CreateVectorOfStructs(st);
  }
  return fb::CreateContext(fbb, method, target, options, tensor_vec, step_vec, inputs, outputs,
                           c.arena_bytes, c.scratch_bytes, symbols, input_symbols, state);
}

std::string ToString(const flatbuffers::String* s) {
  return s == nullptr ? std::string() : std::string(s->c_str(), s->size());
}

// The 2.0.8 verifier checks the alignment of a vector's length but not of its
// elements, so a hostile file can place an int64 vector at a 4-byte boundary.
// Copying the bytes avoids misaligned loads; the file is little-endian like
// every host fcb supports (FLATBUFFERS_LITTLEENDIAN is asserted below).
static_assert(static_cast<int32_t>(DType::kF32) == 1, "fcb.fbs: Tensor.dtype defaults to 1 (float32)");
static_assert(FLATBUFFERS_LITTLEENDIAN, "fcb reads .fcb metadata in place on little-endian hosts");

template <typename T>
std::vector<T> ToVector(const flatbuffers::Vector<T>* v) {
  if (v == nullptr || v->size() == 0) return {};
  std::vector<T> out(v->size());
  std::memcpy(out.data(), v->Data(), v->size() * sizeof(T));
  return out;
}

AttrDesc DecodeAttr(const fb::Attr& a) {
  AttrDesc attr;
  attr.name = ToString(a.name());
  attr.ints = ToVector(a.ints());
  attr.floats = ToVector(a.floats());
  attr.str = ToString(a.str());
  return attr;
}

StepDesc DecodeStep(const fb::Step& s) {
  StepDesc out;
  out.op = ToString(s.op());
  out.node = ToString(s.node());
  out.inputs = ToVector(s.inputs());
  out.outputs = ToVector(s.outputs());
  if (s.attrs() != nullptr)
    for (const fb::Attr* a : *s.attrs()) out.attrs.push_back(DecodeAttr(*a));
  out.guard = ToVector(s.guard());
  return out;
}

TensorDesc DecodeTensor(const fb::Tensor& t) {
  TensorDesc td;
  td.name = ToString(t.name());
  td.dtype = static_cast<DType>(t.dtype());  // any int32: the plan checker refuses unknown codes
  td.shape = ToVector(t.shape());
  td.storage = static_cast<Storage>(t.storage());
  td.offset = t.offset();
  td.blob = t.blob();
  return td;
}

ContextDesc DecodeContext(const fb::Context& c) {
  ContextDesc out;
  out.method = ToString(c.method());
  out.target = ToString(c.target());
  out.options = ToString(c.options());
  out.tensors.reserve(c.tensors()->size());
  for (const fb::Tensor* t : *c.tensors()) out.tensors.push_back(DecodeTensor(*t));
  out.steps.reserve(c.steps()->size());
  for (const fb::Step* s : *c.steps()) out.steps.push_back(DecodeStep(*s));
  out.inputs = ToVector(c.inputs());
  out.outputs = ToVector(c.outputs());
  out.arena_bytes = c.arena_bytes();
  out.scratch_bytes = c.scratch_bytes();
  if (c.symbols())
    for (const fb::Symbol* sym : *c.symbols()) out.symbols.push_back({ToString(sym->name()), sym->lo(), sym->hi()});
  out.input_symbols = ToVector(c.input_symbols());
  if (c.state())
    for (const fb::StateBinding* b : *c.state()) out.state.push_back({b->input(), b->output()});
  return out;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string CheckIndex(int64_t index, size_t count, bool allow_absent) {
  if (allow_absent && index == -1) return "";
  if (index < 0 || static_cast<uint64_t>(index) >= count)
    return "is tensor " + std::to_string(index) + ", out of range (context has " +
           std::to_string(count) + " tensors)";
  return "";
}

std::string CheckContext(const ContextDesc& c, size_t num_blobs) {
  const size_t n = c.tensors.size();
  if (n > limits::kMaxTensorsPerContext)
    return "holds " + std::to_string(n) + " tensors, more than the limit of " +
           std::to_string(limits::kMaxTensorsPerContext) + " per context (fcb/limits.h)";
  if (c.steps.size() > limits::kMaxStepsPerContext)
    return "holds " + std::to_string(c.steps.size()) + " steps, more than the limit of " +
           std::to_string(limits::kMaxStepsPerContext) + " per context (fcb/limits.h)";
  for (size_t i = 0; i < n; ++i) {
    const TensorDesc& t = c.tensors[i];
    std::string where = "tensor " + std::to_string(i) + " " + Quote(t.name) + ": ";
    if (t.shape.size() > static_cast<size_t>(limits::kMaxRank))
      return where + std::to_string(t.shape.size()) + " dimensions, more than the limit of " +
             std::to_string(limits::kMaxRank) + " (fcb/limits.h)";
    if (t.storage != Storage::kArena && t.storage != Storage::kWeight && t.storage != Storage::kState)
      return where + "unknown storage kind " + std::to_string(static_cast<int>(t.storage));
    if (t.storage == Storage::kState && (t.offset != 0 || t.blob != -1))
      return where + "a state tensor with an arena offset or a blob";
    if (t.storage == Storage::kWeight &&
        (t.blob < 0 || static_cast<uint64_t>(t.blob) >= num_blobs))
      return where + "blob id " + std::to_string(t.blob) + " out of range (file has " +
             std::to_string(num_blobs) + " blobs)";
  }
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const StepDesc& s = c.steps[i];
    std::string where = "step " + std::to_string(i) + " " + Quote(s.op) + " (node " +
                        Quote(s.node) + "): ";
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      std::string err = CheckIndex(s.inputs[k], n, /*allow_absent=*/true);
      if (!err.empty()) return where + "input " + std::to_string(k) + " " + err;
    }
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      std::string err = CheckIndex(s.outputs[k], n, false);
      if (!err.empty()) return where + "output " + std::to_string(k) + " " + err;
    }
    if (!s.guard.empty()) {
      if (s.guard.size() != 3 || (s.guard[0] != 1 && s.guard[0] != 2) || s.guard[1] < 1 || s.guard[1] > 64 ||
          s.guard[2] < 0 || s.outputs.empty())
        return where + "guard must be [kind 1 or 2, tile 1..64, threshold >= 0] on a step with an output";
      if (c.symbols.empty()) return where + "has a guard but the plan has no symbols";
    }
  }
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    std::string err = CheckIndex(c.inputs[k], n, false);
    if (!err.empty()) return "method input " + std::to_string(k) + " " + err;
  }
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    std::string err = CheckIndex(c.outputs[k], n, false);
    if (!err.empty()) return "method output " + std::to_string(k) + " " + err;
  }
  if (c.symbols.size() > limits::kMaxSymbols)
    return "holds " + std::to_string(c.symbols.size()) + " symbols, more than the limit of " +
           std::to_string(limits::kMaxSymbols) + " per context (fcb/limits.h)";
  if (!c.symbols.empty() || !c.input_symbols.empty()) {
    for (size_t k = 0; k < c.symbols.size(); ++k) {
      const auto& sym = c.symbols[k];
      if (sym.name.empty() || sym.name.size() > 256)
        return "symbol " + std::to_string(k) + " has a name of " + std::to_string(sym.name.size()) +
               " bytes (1 to 256)";
      if (sym.lo < 0 || sym.lo > sym.hi || static_cast<uint64_t>(sym.hi) > limits::kMaxTensorElements)
        return "symbol " + std::to_string(k) + " " + Quote(sym.name) + " has the range " + std::to_string(sym.lo) +
               ".." + std::to_string(sym.hi) + " (needs 0 <= lo <= hi <= " +
               std::to_string(limits::kMaxTensorElements) + ")";
    }
    size_t dims = 0;
    for (int32_t t : c.inputs) dims += c.tensors[t].shape.size();  // indices checked above
    if (c.input_symbols.size() != dims)
      return "input_symbols has " + std::to_string(c.input_symbols.size()) + " entries; the inputs have " +
             std::to_string(dims) + " dims";
    size_t k = 0;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const TensorDesc& t = c.tensors[c.inputs[i]];
      for (size_t d = 0; d < t.shape.size(); ++d, ++k) {
        const int32_t sym = c.input_symbols[k];
        if (sym == -1) continue;
        if (sym < 0 || static_cast<size_t>(sym) >= c.symbols.size())
          return "method input " + std::to_string(i) + " " + Quote(t.name) + " dim " + std::to_string(d) +
                 " refers to symbol " + std::to_string(sym) + ", out of range (context has " +
                 std::to_string(c.symbols.size()) + " symbols)";
        if (t.shape[d] != c.symbols[sym].hi)
          return "method input " + std::to_string(i) + " " + Quote(t.name) + " dim " + std::to_string(d) + " is " +
                 std::to_string(t.shape[d]) + ", not the bound " + std::to_string(c.symbols[sym].hi) +
                 " of its symbol " + Quote(c.symbols[sym].name);
      }
    }
  }
  // State bindings: positions in range, each input and output bound once,
  // one dtype and shape, and the input's dims fixed (a state buffer has one
  // size). Whether the producing step writes it in place is the plan
  // checker's (ops::CheckStateBinding).
  if (c.state.size() > c.inputs.size())
    return "holds " + std::to_string(c.state.size()) + " state bindings, more than its " +
           std::to_string(c.inputs.size()) + " inputs";
  for (size_t k = 0; k < c.state.size(); ++k) {
    const auto& b = c.state[k];
    const std::string where = "state binding " + std::to_string(k) + " ";
    if (b.input < 0 || static_cast<size_t>(b.input) >= c.inputs.size())
      return where + "names method input " + std::to_string(b.input) + ", out of range (method has " +
             std::to_string(c.inputs.size()) + " inputs)";
    if (b.output < 0 || static_cast<size_t>(b.output) >= c.outputs.size())
      return where + "names method output " + std::to_string(b.output) + ", out of range (method has " +
             std::to_string(c.outputs.size()) + " outputs)";
    for (size_t j = 0; j < k; ++j)
      if (c.state[j].input == b.input || c.state[j].output == b.output)
        return where + "binds method input " + std::to_string(b.input) + " or output " + std::to_string(b.output) +
               " a second time (binding " + std::to_string(j) + ")";
    const TensorDesc& in = c.tensors[c.inputs[b.input]];
    const TensorDesc& out = c.tensors[c.outputs[b.output]];
    if (c.inputs[b.input] == c.outputs[b.output] || in.storage == Storage::kWeight || out.storage == Storage::kWeight)
      return where + "binds " + Quote(in.name) + " and " + Quote(out.name) + ", which must be two activations";
    // A growing cache (past and present differing in their rows, dim 2,
    // which is chosen at each run): the plan checker accepts it only where
    // an in-place append writes it (ops::CheckStateBinding).
    const bool grows = in.shape.size() == 4 && out.shape.size() == 4 && in.shape != out.shape;
    if (grows && (in.dtype != out.dtype || in.shape.size() != 4 || out.shape.size() != 4 ||
                  in.shape[0] != out.shape[0] || in.shape[1] != out.shape[1] || in.shape[3] != out.shape[3]))
      return where + "binds " + Quote(in.name) + " and " + Quote(out.name) + ", a growing cache, of different "
             "dtypes or shapes other than their rows";
    if (!grows && (in.dtype != out.dtype || in.shape != out.shape))
      return where + "binds " + Quote(in.name) + " and " + Quote(out.name) + " of different dtypes or shapes";
    // Both kept in the State (kState), or both arena tensors whose slots go
    // unused (files written before kState).
    if (in.storage != out.storage)
      return where + "binds " + Quote(in.name) + " and " + Quote(out.name) +
             " of two storages; both are the State's (or both arena tensors)";
    if (!c.input_symbols.empty()) {
      size_t k0 = 0;
      for (int32_t i = 0; i < b.input; ++i) k0 += c.tensors[c.inputs[i]].shape.size();
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (c.input_symbols[k0 + d] != -1 && !(grows && d == 2))
          return where + "binds " + Quote(in.name) + ", whose dim " + std::to_string(d) +
                 " is chosen at each run; a state has one shape";
    }
  }
  // A state tensor has no bytes but the State's: a binding must name it.
  for (size_t i = 0; i < n; ++i) {
    if (c.tensors[i].storage != Storage::kState) continue;
    bool bound = false;
    for (const auto& b : c.state)
      bound = bound || c.inputs[b.input] == static_cast<int32_t>(i) || c.outputs[b.output] == static_cast<int32_t>(i);
    if (!bound)
      return "tensor " + std::to_string(i) + " " + Quote(c.tensors[i].name) +
             " is stored in a state, but no state binding names it";
  }
  return "";
}

std::string CheckBlob(const BlobDesc& b, size_t id, uint64_t pool_offset, uint64_t pool_size) {
  std::string where = "blob " + std::to_string(id) + " [pool offset " +
                      std::to_string(b.offset) + ", size " + std::to_string(b.size) + "]";
  uint64_t end = 0;
  if (__builtin_add_overflow(b.offset, b.size, &end) || end > pool_size)
    return where + " extends past the end of the weight pool [offset " +
           std::to_string(pool_offset) + ", size " + std::to_string(pool_size) + "]";
  uint64_t align = b.size >= kLargeBlob ? kPoolAlign : kBlobAlign;
  if (b.offset % align != 0)
    return where + " (file offset " + std::to_string(pool_offset + b.offset) + ") is not " +
           std::to_string(align) + "-byte aligned";
  return "";
}

// What DecodeContext allocates for `c`, near enough (the payloads and the
// element structs; not the allocator's own overhead). Walks the same tables
// the verifier visited, so it is bounded the same way.
uint64_t DecodedBytes(const fb::Context& c) {
  auto str = [](const flatbuffers::String* s) -> uint64_t { return s ? s->size() : 0; };
  auto vec = [](const auto* v, uint64_t elem) -> uint64_t { return v ? uint64_t{v->size()} * elem : 0; };
  uint64_t n = sizeof(ContextDesc) + str(c.method()) + str(c.target()) + str(c.options()) +
               vec(c.inputs(), 4) + vec(c.outputs(), 4) + vec(c.input_symbols(), 4) +
               vec(c.state(), sizeof(ContextDesc::StateDesc));
  if (c.symbols())
    for (const fb::Symbol* sym : *c.symbols()) n += sizeof(ContextDesc::Symbol) + str(sym->name());
  for (const fb::Tensor* t : *c.tensors()) n += sizeof(TensorDesc) + str(t->name()) + vec(t->shape(), 8);
  for (const fb::Step* s : *c.steps()) {
    n += sizeof(StepDesc) + str(s->op()) + str(s->node()) + vec(s->inputs(), 4) + vec(s->outputs(), 4) +
         vec(s->guard(), 8);
    if (s->attrs())
      for (const fb::Attr* a : *s->attrs())
        n += sizeof(AttrDesc) + str(a->name()) + vec(a->ints(), 8) + vec(a->floats(), 4) + str(a->str());
  }
  return n;
}

}  // namespace

std::vector<uint8_t> EncodeMetadata(const FileDesc& desc) {
  FlatBufferBuilder fbb(4096);
  std::vector<Offset<fb::Context>> contexts;
  PlanCache cache;
  for (const ContextDesc& c : desc.contexts) contexts.push_back(EncodeContext(fbb, c, cache));
  std::vector<fb::Blob> blobs;
  for (const BlobDesc& b : desc.blobs) blobs.emplace_back(b.offset, b.size, b.hash_lo, b.hash_hi);
  auto producer = Str(fbb, desc.producer);
  auto context_vec = fbb.CreateVector(contexts);
  auto blob_vec = fbb.CreateVectorOfStructs(blobs);
  // Left out when empty, so a file without attachments encodes exactly as
  // before the field existed.
  Offset<flatbuffers::Vector<Offset<fb::Attachment>>> attachment_vec = 0;
  if (!desc.attachments.empty()) {
    std::vector<Offset<fb::Attachment>> attachments;
    for (const AttachmentDesc& a : desc.attachments)
      attachments.push_back(fb::CreateAttachment(fbb, Str(fbb, a.name), a.blob));
    attachment_vec = fbb.CreateVector(attachments);
  }
  fbb.Finish(fb::CreateFile(fbb, producer, context_vec, blob_vec, desc.plan_version, attachment_vec),
             fb::FileIdentifier());
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

std::vector<uint64_t> ContextMetadataBytes(const FileDesc& desc, uint64_t* rest) {
  FileDesc prefix = desc;
  prefix.contexts.clear();
  uint64_t prev = EncodeMetadata(prefix).size();
  if (rest) *rest = prev;
  std::vector<uint64_t> shares;
  for (const ContextDesc& c : desc.contexts) {
    prefix.contexts.push_back(c);
    const uint64_t now = EncodeMetadata(prefix).size();
    // Never negative: a context adds a table of dozens of bytes, more than
    // any change in alignment padding (at most 7 bytes) can take away.
    shares.push_back(now - prev);
    prev = now;
  }
  return shares;
}

Result<FileDesc> DecodeMetadata(const uint8_t* data, uint64_t size, uint64_t meta_offset,
                                uint64_t pool_offset, uint64_t pool_size, uint64_t max_decoded_bytes,
                                uint64_t* decoded_bytes) {
  std::string where = "metadata [offset " + std::to_string(meta_offset) + ", size " +
                      std::to_string(size) + "]";
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return CorruptFile(where + " is larger than FlatBuffers allows (" +
                       std::to_string(FLATBUFFERS_MAX_BUFFER_SIZE) + " bytes)");
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 16;  // the schema nests 5 levels deep
  // A table takes at least 4 bytes, so a buffer holds at most size/4 of
  // them; contexts with equal plans share their tensor and step lists (see
  // EncodeContext), which the verifier visits once per context. The bound
  // allows kMaxSharingContexts visits of every table, which keeps
  // verification linear in the size (a hostile file cannot make it
  // quadratic by pointing every context at one huge list).
  constexpr uint64_t kMaxSharingContexts = 64;
  opts.max_tables = static_cast<flatbuffers::uoffset_t>(
      std::min<uint64_t>((size / 4 + 16) * kMaxSharingContexts, std::numeric_limits<flatbuffers::uoffset_t>::max()));
  flatbuffers::Verifier verifier(data, static_cast<size_t>(size), opts);
  if (!fb::VerifyFileBuffer(verifier))
    return CorruptFile(where + ": FlatBuffers verification failed (malformed metadata, a "
                       "missing required field, or wrong file identifier)");

  const fb::File* file = fb::GetFile(data);
  // Counts and the decoded size, before anything is allocated for them.
  if (file->contexts()->size() > limits::kMaxContexts)
    return CorruptFile(where + ": " + std::to_string(file->contexts()->size()) +
                       " compiled contexts, more than the limit of " + std::to_string(limits::kMaxContexts) +
                       " per file (fcb/limits.h)");
  uint64_t decoded = sizeof(FileDesc) + uint64_t{file->blobs()->size()} * sizeof(BlobDesc);
  if (file->attachments() != nullptr) {
    if (file->attachments()->size() > limits::kMaxAttachments)
      return CorruptFile(where + ": " + std::to_string(file->attachments()->size()) +
                         " attachments, more than the limit of " + std::to_string(limits::kMaxAttachments) +
                         " per file (fcb/limits.h)");
    for (const fb::Attachment* a : *file->attachments()) decoded += sizeof(AttachmentDesc) + a->name()->size();
  }
  for (flatbuffers::uoffset_t i = 0; i < file->contexts()->size(); ++i) {
    const fb::Context* c = file->contexts()->Get(i);
    const uint64_t nt = c->tensors()->size(), ns = c->steps()->size();
    if (nt > limits::kMaxTensorsPerContext || ns > limits::kMaxStepsPerContext)
      return CorruptFile(where + ": context " + std::to_string(i) + " holds " + std::to_string(nt) + " tensors and " +
                         std::to_string(ns) + " steps; the limits are " + std::to_string(limits::kMaxTensorsPerContext) +
                         " and " + std::to_string(limits::kMaxStepsPerContext) + " per context (fcb/limits.h)");
    decoded += DecodedBytes(*c);
  }
  if (decoded_bytes) *decoded_bytes = decoded;
  if (decoded > max_decoded_bytes)
    return ResourceExhausted(where + ": decoding it takes " + std::to_string(decoded) +
                             " bytes, more than the memory limit of " + std::to_string(max_decoded_bytes) + " bytes");
  FileDesc desc;
  desc.producer = ToString(file->producer());
  desc.plan_version = file->plan_version();
  desc.contexts.reserve(file->contexts()->size());
  for (const fb::Context* c : *file->contexts()) desc.contexts.push_back(DecodeContext(*c));
  desc.blobs.reserve(file->blobs()->size());
  std::vector<fb::Blob> blobs(file->blobs()->size());  // copied: see ToVector
  if (!blobs.empty())
    std::memcpy(blobs.data(), file->blobs()->Data(), blobs.size() * sizeof(fb::Blob));
  for (const fb::Blob& b : blobs)
    desc.blobs.push_back(BlobDesc{b.offset(), b.size(), b.hash_lo(), b.hash_hi()});
  if (file->attachments() != nullptr) {
    desc.attachments.reserve(file->attachments()->size());
    for (const fb::Attachment* a : *file->attachments())
      desc.attachments.push_back(AttachmentDesc{ToString(a->name()), a->blob()});
  }

  std::string err = CheckDescStructure(desc, pool_offset, pool_size);
  if (!err.empty()) return CorruptFile(where + ": " + err);
  return desc;
}

std::string CheckDescStructure(const FileDesc& desc, uint64_t pool_offset, uint64_t pool_size) {
  if (desc.contexts.size() > limits::kMaxContexts)
    return std::to_string(desc.contexts.size()) + " compiled contexts, more than the limit of " +
           std::to_string(limits::kMaxContexts) + " per file (fcb/limits.h)";
  for (size_t i = 0; i < desc.blobs.size(); ++i) {
    std::string err = CheckBlob(desc.blobs[i], i, pool_offset, pool_size);
    if (!err.empty()) return err;
  }
  if (desc.attachments.size() > limits::kMaxAttachments)
    return std::to_string(desc.attachments.size()) + " attachments, more than the limit of " +
           std::to_string(limits::kMaxAttachments) + " per file (fcb/limits.h)";
  for (size_t i = 0; i < desc.attachments.size(); ++i) {
    const AttachmentDesc& a = desc.attachments[i];
    const std::string where = "attachment " + std::to_string(i) + ": ";
    std::string err = CheckAttachmentName(a.name);
    if (!err.empty()) return where + err;
    if (a.blob < 0 || static_cast<uint64_t>(a.blob) >= desc.blobs.size())
      return where + "'" + a.name + "' refers to blob " + std::to_string(a.blob) + ", out of range (file has " +
             std::to_string(desc.blobs.size()) + " blobs)";
    // Sorted and unique, so a lookup by name is unambiguous.
    if (i > 0 && !(desc.attachments[i - 1].name < a.name))
      return where + "'" + a.name + "' is not after '" + desc.attachments[i - 1].name +
             "': attachment names must be unique and sorted";
  }
  for (size_t i = 0; i < desc.contexts.size(); ++i) {
    const ContextDesc& c = desc.contexts[i];
    std::string err = CheckContext(c, desc.blobs.size());
    if (!err.empty())
      return "context " + std::to_string(i) + " (method " + Quote(c.method) + ", target " +
             Quote(c.target) + "): " + err;
  }
  return "";
}

std::string CheckAttachmentName(const std::string& name) {
  if (name.empty()) return "the attachment name is empty";
  if (name.size() > limits::kMaxAttachmentNameBytes)
    return "the attachment name is " + std::to_string(name.size()) + " bytes long, more than the limit of " +
           std::to_string(limits::kMaxAttachmentNameBytes) + " (fcb/limits.h)";
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x21 || c > 0x7e || c == '=') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      return "the attachment name has byte " + std::string(hex) + " at position " + std::to_string(i) +
             "; names are printable ASCII without spaces or '=' (e.g. vocab.json)";
    }
  }
  return "";
}

}  // namespace fcb::format
