// Compile-spec parsing and validation: every rule is checked before any work
// starts, and every error names the problem and the fix.
#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/target.h"
#include "fcb/fcb.h"
#include "fcb/limits.h"
#include "format/metadata.h"
#include "ops/lowering.h"

namespace fcb {
namespace {

using nlohmann::json;

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Nearest(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& k : known) {
    const size_t d = EditDistance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

const std::vector<std::string>& OptionKeys() {
  static const std::vector<std::string> k = {"optimization_level", "precision", "int4_head", "int4_activations"};
  return k;
}

Result<TargetOptions> ParseOptions(const json& j, const std::string& where) {
  if (!j.is_object())
    return InvalidArgument(where + " must be a JSON object such as {\"optimization_level\": 2}");
  TargetOptions o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "optimization_level") {
      if (!it->is_number_integer())
        return InvalidArgument(where + ": optimization_level must be an integer from 0 to 3");
      o.optimization_level = it->get<int>();
    } else if (key == "precision") {
      if (!it->is_string())
        return InvalidArgument(where + ": precision must be a string: \"fp32\", \"bf16\", \"int8\" or \"int4\"");
      o.precision = it->get<std::string>();
    } else if (key == "int4_head") {
      if (!it->is_boolean())
        return InvalidArgument(where + ": int4_head must be true or false (with precision \"int4\": whether the LM "
                               "head and embedding tables are 4-bit too; default false, 8-bit)");
      o.int4_head = it->get<bool>();
    } else if (key == "int4_activations") {
      if (!it->is_string() || (it->get<std::string>() != "int8" && it->get<std::string>() != "float"))
        return InvalidArgument(where + ": int4_activations must be \"int8\" (the default: int8 activations, "
                               "integer dot products) or \"float\" (float arithmetic on the dequantized weights)");
      o.int4_activations = it->get<std::string>();
    } else {
      return InvalidArgument(where + ": unknown option '" + key + "'; did you mean '" +
                             Nearest(key, OptionKeys()) + "'? Known options: " + Join(OptionKeys()));
    }
  }
  return o;
}

// A JSON element shown in a message, cut short when long.
std::string Shown(const json& j) {
  std::string t = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return t.size() > 40 ? t.substr(0, 37) + "..." : t;
}

// One dim: a size (an integer >= 1) or a range [lo, hi] (1 <= lo <= hi).
// Errors show a correct example in the JSON form.
Result<InputDim> ParseDim(const json& d, const std::string& name, size_t i) {
  const std::string where = "input_shapes['" + name + "'] dim " + std::to_string(i);
  if (d.is_number_integer()) {
    if (d.get<int64_t>() < 1 || (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
      return InvalidArgument("input_shapes['" + name + "'] must be a list of positive integers, e.g. [1, 3, 224, 224]; " +
                             "dim " + std::to_string(i) + " is " + Shown(d) + " (dimensions start at 1)");
    return InputDim(d.get<int64_t>());
  }
  if (!d.is_array())
    return InvalidArgument("input_shapes['" + name + "'] must be a list of positive integers, e.g. [1, 3, 224, 224]; " +
                           "dim " + std::to_string(i) + " is " + Shown(d) +
                           ": a dim is a size (an integer) or a range [lo, hi], e.g. [1, [1, 512]]");
  if (d.size() != 2 || !d[0].is_number_integer() || !d[1].is_number_integer())
    return InvalidArgument(where + " is " + Shown(d) +
                           ": a range is a list of two integers [lo, hi], e.g. [1, [1, 512]] for 1 to 512");
  for (const json& e : d)
    if (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return InvalidArgument(where + " is " + Shown(d) + ": its ends must fit int64, e.g. [1, [1, 512]]");
  const int64_t lo = d[0].get<int64_t>(), hi = d[1].get<int64_t>();
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (lo < 1)
    return InvalidArgument(where + " is the range " + range + ", which starts below 1: dimensions start at 1, e.g. [1, " +
                           std::to_string(std::max<int64_t>(hi, 1)) + "]");
  if (lo > hi)
    return InvalidArgument(where + " is the range " + range + ", whose low end is above its high end; write it [" +
                           std::to_string(hi) + ", " + std::to_string(lo) + "]");
  return InputDim(lo, hi);
}

Result<std::vector<InputDim>> ParseDims(const json& j, const std::string& name) {
  if (!j.is_array() || j.empty())
    return InvalidArgument("input_shapes['" + name + "'] must be a non-empty list of positive integers, e.g. [1, 3, 224, 224]" +
                           ", where a bounded dim is a range [lo, hi], e.g. [1, [1, 512]]");
  std::vector<InputDim> dims;
  for (const auto& d : j) {
    FCB_ASSIGN_OR_RETURN(InputDim x, ParseDim(d, name, dims.size()));
    dims.push_back(x);
  }
  return dims;
}

// A JSON number, bool or nested list of them as an array: bools give bool,
// integers int64, any other number float64 (the import converts it to the
// input's type). Lists must be rectangular.
Result<NpyArray> ParseValue(const json& j, const std::string& name) {
  const std::string what = "input_values['" + name + "']";
  NpyArray a;
  const json* first = &j;
  while (first->is_array()) {
    if (first->empty()) return InvalidArgument(what + " has an empty list; give the value's elements");
    if (a.shape.size() == static_cast<size_t>(limits::kMaxRank))
      return InvalidArgument(what + " has more than " + std::to_string(limits::kMaxRank) +
                             " levels of lists, the rank limit (fcb/limits.h)");
    a.shape.push_back(static_cast<int64_t>(first->size()));
    first = &(*first)[0];
  }
  std::vector<const json*> leaves;
  // Walks `j` checking each list has the size its depth requires.
  std::function<Status(const json&, size_t)> walk = [&](const json& e, size_t depth) -> Status {
    if (depth == a.shape.size()) {
      if (!e.is_boolean() && !e.is_number())
        return InvalidArgument(what + " must hold numbers or true/false, in nested lists for a tensor");
      leaves.push_back(&e);
      return Status::Ok();
    }
    if (!e.is_array() || static_cast<int64_t>(e.size()) != a.shape[depth])
      return InvalidArgument(what + " is not rectangular: every list at depth " + std::to_string(depth) +
                             " must have " + std::to_string(a.shape[depth]) + " elements");
    for (const auto& x : e) FCB_RETURN_IF_ERROR(walk(x, depth + 1));
    return Status::Ok();
  };
  FCB_RETURN_IF_ERROR(walk(j, 0));
  bool all_bool = true, all_int = true;
  for (const json* e : leaves) {
    all_bool = all_bool && e->is_boolean();
    all_int = all_int && e->is_number_integer();
  }
  if (!all_bool && std::any_of(leaves.begin(), leaves.end(), [](const json* e) { return e->is_boolean(); }))
    return InvalidArgument(what + " mixes true/false with numbers");
  a.dtype = all_bool ? kNpyBool : all_int ? kNpyI64 : kNpyF64;
  for (const json* e : leaves) {
    if (all_bool) {
      a.data.push_back(e->get<bool>() ? 1 : 0);
    } else if (all_int) {
      if (e->is_number_unsigned() && e->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return InvalidArgument(what + " has an integer beyond int64");
      const int64_t v = e->get<int64_t>();
      const auto* b = reinterpret_cast<const uint8_t*>(&v);
      a.data.insert(a.data.end(), b, b + 8);
    } else {
      const double v = e->get<double>();
      const auto* b = reinterpret_cast<const uint8_t*>(&v);
      a.data.insert(a.data.end(), b, b + 8);
    }
  }
  return a;
}

Status ValidateAttachments(const std::map<std::string, std::string>& attachments) {
  if (attachments.size() > limits::kMaxAttachments)
    return InvalidArgument("the spec has " + std::to_string(attachments.size()) + " attachments, more than the limit of " +
                           std::to_string(limits::kMaxAttachments) + " (fcb/limits.h)");
  for (const auto& entry : attachments) {
    const std::string err = format::CheckAttachmentName(entry.first);
    if (!err.empty()) return InvalidArgument("attachment '" + EscapeForDisplay(entry.first) + "': " + err);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> ReadAttachmentFile(const std::string& name, const std::string& path) {
  const std::string what = "attachment '" + EscapeForDisplay(name) + "'";
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st))
    return NotFound(what + ": file '" + path + "' does not exist");
  if (!std::filesystem::is_regular_file(st))
    return InvalidArgument(what + ": '" + path + "' is not a regular file; attach the bytes of a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return IoError(what + ": cannot open '" + path + "' for reading");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return IoError(what + ": error reading '" + path + "'");
  return bytes;
}

Status ValidateSpec(const CompileSpec& spec) {
  if (spec.targets.empty())
    return InvalidArgument("the compile spec lists no targets; give at least one in \"targets\", e.g. "
                           "[\"generic\", \"x86-64-v3\"], or \"all\" for every known target");
  const bool all = std::find(spec.targets.begin(), spec.targets.end(), "all") != spec.targets.end();
  if (all && spec.targets.size() > 1)
    return InvalidArgument("'all' already names every target; use 'all' alone or list targets individually");
  if (!spec.target_options.empty() && spec.target_options.size() != spec.targets.size())
    return InvalidArgument("targets has " + std::to_string(spec.targets.size()) + " entries but target_options has " +
                           std::to_string(spec.target_options.size()) +
                           "; give one options object per target, in the same order (or none for defaults)");
  std::set<std::string> seen;
  for (size_t i = 0; i < spec.targets.size(); ++i) {
    const std::string& t = spec.targets[i];
    if (t != "all" && !TargetFromName(t)) {
      std::vector<std::string> names;
      for (const auto& k : KnownTargets()) names.push_back(k.name);
      return InvalidArgument("unknown target '" + t + "' (position " + std::to_string(i) + "); did you mean '" +
                             Nearest(t, names) + "'? Known targets: " + KnownTargetNames() + ", or all");
    }
    if (!seen.insert(t).second)
      return InvalidArgument("target '" + t + "' is listed more than once; list each target once");
  }
  for (size_t i = 0; i < spec.target_options.size(); ++i) {
    const TargetOptions& o = spec.target_options[i];
    const std::string where = "target_options[" + std::to_string(i) + "] (target '" + spec.targets[i] + "')";
    if (o.optimization_level < 0 || o.optimization_level > 3)
      return InvalidArgument(where + ": optimization_level " + std::to_string(o.optimization_level) +
                             " is out of range; use an integer from 0 to 3");
    const std::optional<ops::Precision> precision = ops::ParsePrecision(o.precision);
    if (!precision)
      return InvalidArgument(where + ": precision '" + o.precision +
                             "' is not valid; use \"fp32\", \"bf16\", \"int8\" or \"int4\"");
    if (o.int4_head && *precision != ops::Precision::kInt4)
      return InvalidArgument(where + ": int4_head is an option of precision \"int4\", not of precision '" +
                             o.precision + "'; remove it or set \"precision\": \"int4\"");
    if (!o.int4_activations.empty() && *precision != ops::Precision::kInt4)
      return InvalidArgument(where + ": int4_activations is an option of precision \"int4\", not of precision '" +
                             o.precision + "'; remove it or set \"precision\": \"int4\"");
    if (!o.int4_activations.empty() && o.int4_activations != "int8" && o.int4_activations != "float")
      return InvalidArgument(where + ": int4_activations '" + o.int4_activations +
                             "' is not valid; use \"int8\" (the default) or \"float\"");
    if (*precision != ops::Precision::kFp32 && o.optimization_level == 0)
      return InvalidArgument(where + ": precision " + o.precision +
                             " needs the optimizing pipeline; set optimization_level to 1 or higher, or use "
                             "precision fp32");
  }
  for (const auto& [name, dims] : spec.input_shapes) {
    if (name.empty() || name.back() == ':')
      return InvalidArgument("an input shape has an empty input name; write NAME=1x3x224x224 or METHOD:NAME=...");
    if (dims.empty())
      return InvalidArgument("input shape for '" + name + "' has no dimensions; write e.g. " + name + "=1x3x224x224");
    for (size_t i = 0; i < dims.size(); ++i) {
      const InputDim& d = dims[i];
      const std::string range = std::to_string(d.lo) + ".." + std::to_string(d.hi);
      if (!d.is_range() && d.lo < 1)
        return InvalidArgument("input shape for '" + name + "' has a dimension < 1; all dims must be positive");
      if (d.lo < 1)
        return InvalidArgument("input shape for '" + name + "' has the range " + range + " at dim " +
                               std::to_string(i) + ", which starts below 1; dimensions start at 1, e.g. 1.." +
                               std::to_string(std::max<int64_t>(d.hi, 1)));
      if (d.lo > d.hi)
        return InvalidArgument("input shape for '" + name + "' has the range " + range + " at dim " +
                               std::to_string(i) + ", whose low end is above its high end; write it " +
                               std::to_string(d.hi) + ".." + std::to_string(d.lo));
    }
  }
  for (const auto& [name, value] : spec.input_values) {
    if (name.empty() || name.back() == ':')
      return InvalidArgument("an input value has an empty input name; write NAME=FILE.npy or METHOD:NAME=...");
  }
  FCB_RETURN_IF_ERROR(ValidateAttachments(spec.attachments));
  if (spec.kv_capacity < 0 || spec.kv_capacity > CompileSpec::kMaxKvCapacity)
    return InvalidArgument("kv_capacity " + std::to_string(spec.kv_capacity) + " is out of range: give the KV cache's "
                           "positions, 1 to " + std::to_string(CompileSpec::kMaxKvCapacity) + " (0 or absent: off)");
  if (spec.kv_capacity > 0 && spec.state.empty() && !spec.state_auto)
    return InvalidArgument("kv_capacity " + std::to_string(spec.kv_capacity) + " needs \"state\": the cache it sizes "
                           "is kept between runs; add \"state\": \"auto\" (or name the pairs, "
                           "{\"past_key_values.0.key\": \"present.0.key\", ...})");
  std::set<std::string> kept;
  for (const std::string& o : spec.outputs) {
    const auto colon = o.find(':');
    if (o.empty() || o.back() == ':' || colon == 0)
      return InvalidArgument("\"outputs\" has an entry '" + EscapeForDisplay(o) +
                             "' with an empty name; write NAME (every method) or METHOD:NAME (one method)");
    if (!kept.insert(o).second)
      return InvalidArgument("\"outputs\" lists '" + EscapeForDisplay(o) + "' more than once; list each output once");
  }
  std::map<std::string, std::string> state_outputs;  // output -> the input first bound to it
  for (const auto& [input, output] : spec.state) {
    if (input.empty() || input.back() == ':' || output.empty())
      return InvalidArgument("a state pair has an empty name; write {\"PAST_INPUT\": \"PRESENT_OUTPUT\"} or "
                             "{\"METHOD:PAST_INPUT\": \"PRESENT_OUTPUT\"}");
    const auto colon = input.find(':');
    const std::string key = (colon == std::string::npos ? "" : input.substr(0, colon + 1)) + output;
    auto [it, fresh] = state_outputs.emplace(key, input);
    if (!fresh)
      return InvalidArgument("state inputs '" + it->second + "' and '" + input + "' both name the output '" + output +
                             "'; each state has an output of its own");
  }
  return Status::Ok();
}

Result<TargetOptions> ParseTargetOptionsJson(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("the target options are not valid JSON: ") + e.what());
  }
  return ParseOptions(j, "the target options");
}

Result<CompileSpec> ParseSpecJson(const std::string& text) {
  json j;
  // JSON lets an object repeat a key (the last one wins); an attachment name
  // given twice is refused instead, since one of the two files would be lost.
  std::string top_key, duplicate_attachment;
  std::set<std::string> attachment_keys;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) top_key = parsed.get<std::string>();
    if (event == json::parse_event_t::key && depth == 2 && top_key == "attachments" &&
        !attachment_keys.insert(parsed.get<std::string>()).second && duplicate_attachment.empty())
      duplicate_attachment = parsed.get<std::string>();
    return true;
  };
  try {
    j = json::parse(text, note_keys);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("the spec is not valid JSON: ") + e.what());
  }
  if (!duplicate_attachment.empty())
    return InvalidArgument("attachment '" + EscapeForDisplay(duplicate_attachment) +
                           "' is given more than once in \"attachments\"; name each attachment once");
  if (!j.is_object()) return InvalidArgument("the spec must be a JSON object with a \"targets\" key");
  static const std::vector<std::string> kKeys = {"targets", "target_options", "weight_sharing", "input_shapes",
                                                 "input_values", "attachments", "state", "kv_capacity",
                                                 "outputs"};
  CompileSpec spec;
  bool options_is_object = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "targets") {
      if (it->is_string()) {
        spec.targets = {it->get<std::string>()};
      } else if (it->is_array()) {
        for (const auto& t : *it) {
          if (!t.is_string()) return InvalidArgument("\"targets\" must be a string or a list of strings");
          spec.targets.push_back(t.get<std::string>());
        }
      } else {
        return InvalidArgument("\"targets\" must be a string or a list of strings, e.g. [\"generic\", \"x86-64-v3\"]");
      }
    } else if (key == "target_options") {
      if (it->is_object()) {
        options_is_object = true;
        FCB_ASSIGN_OR_RETURN(TargetOptions o, ParseOptions(*it, "target_options"));
        spec.target_options = {o};
      } else if (it->is_array()) {
        for (size_t i = 0; i < it->size(); ++i) {
          FCB_ASSIGN_OR_RETURN(TargetOptions o, ParseOptions((*it)[i], "target_options[" + std::to_string(i) + "]"));
          spec.target_options.push_back(o);
        }
      } else {
        return InvalidArgument("\"target_options\" must be an object or a list of objects, one per target");
      }
    } else if (key == "weight_sharing") {
      if (!it->is_boolean()) return InvalidArgument("\"weight_sharing\" must be true or false");
      spec.weight_sharing = it->get<bool>();
    } else if (key == "input_shapes") {
      if (!it->is_object())
        return InvalidArgument("\"input_shapes\" must be an object mapping input name to dims, e.g. {\"input\": [1, 3, 224, 224]}"
                               " (a bounded dim is a range [lo, hi]: {\"input_ids\": [1, [1, 512]]})");
      for (auto s = it->begin(); s != it->end(); ++s) {
        FCB_ASSIGN_OR_RETURN(spec.input_shapes[s.key()], ParseDims(*s, s.key()));
      }
    } else if (key == "input_values") {
      if (!it->is_object())
        return InvalidArgument("\"input_values\" must be an object mapping input name to a value, e.g. "
                               "{\"use_cache_branch\": [true]}");
      for (auto s = it->begin(); s != it->end(); ++s) {
        FCB_ASSIGN_OR_RETURN(spec.input_values[s.key()], ParseValue(*s, s.key()));
      }
    } else if (key == "state") {
      if (it->is_string() && it->get<std::string>() == "auto") {
        spec.state_auto = true;
      } else if (it->is_object()) {
        for (auto s = it->begin(); s != it->end(); ++s) {
          if (!s->is_string())
            return InvalidArgument("state['" + EscapeForDisplay(s.key()) +
                                   "'] must be the name of the output that carries that input's next value, e.g. "
                                   "{\"past_key_values.0.key\": \"present.0.key\"}");
          spec.state[s.key()] = s->get<std::string>();
        }
      } else {
        return InvalidArgument("\"state\" must be \"auto\" (pair past*/present* names) or an object mapping a "
                               "past input to the output carrying its next value, e.g. "
                               "{\"past_key_values.0.key\": \"present.0.key\"}");
      }
    } else if (key == "kv_capacity") {
      // An integer (a float like 1024.0 is refused too: a capacity is a count).
      if (!it->is_number_integer())
        return InvalidArgument("\"kv_capacity\" must be an integer, the KV cache's positions, e.g. 1024");
      if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(CompileSpec::kMaxKvCapacity)
                                   : it->get<int64_t>() < 0 || it->get<int64_t>() > CompileSpec::kMaxKvCapacity)
        return InvalidArgument("\"kv_capacity\" " + it->dump() + " is out of range: give 1 to " +
                               std::to_string(CompileSpec::kMaxKvCapacity) + " (0: off)");
      spec.kv_capacity = it->get<int64_t>();
    } else if (key == "outputs") {
      if (!it->is_array() || it->empty())
        return InvalidArgument("\"outputs\" must be a non-empty list of output names to keep, e.g. "
                               "[\"encoder:last_hidden_state\", \"logits\"] (NAME for every method, METHOD:NAME for "
                               "one); leave it out to keep every output");
      for (const auto& o : *it) {
        if (!o.is_string())
          return InvalidArgument("\"outputs\" must list output names (strings), e.g. [\"logits\"]; " + Shown(o) +
                                 " is not one");
        spec.outputs.push_back(o.get<std::string>());
      }
    } else if (key == "attachments") {
      if (!it->is_object())
        return InvalidArgument("\"attachments\" must be an object mapping a name to a file path, e.g. "
                               "{\"vocab.json\": \"model/vocab.json\"}");
      // Names first: a bad name is refused before any file is read.
      std::map<std::string, std::string> names;
      for (auto s = it->begin(); s != it->end(); ++s) names[s.key()];
      FCB_RETURN_IF_ERROR(ValidateAttachments(names));
      for (auto s = it->begin(); s != it->end(); ++s) {
        if (!s->is_string())
          return InvalidArgument("attachments['" + EscapeForDisplay(s.key()) +
                                 "'] must be a file path (a string); its bytes are stored");
        FCB_ASSIGN_OR_RETURN(spec.attachments[s.key()], ReadAttachmentFile(s.key(), s->get<std::string>()));
      }
    } else {
      return InvalidArgument("unknown spec key '" + key + "'; did you mean '" + Nearest(key, kKeys) +
                             "'? Known keys: " + Join(kKeys));
    }
  }
  // Scalar form: one options object for a scalar target (or for "all").
  if (options_is_object && spec.targets.size() != 1)
    return InvalidArgument("\"target_options\" is a single object but \"targets\" lists " +
                           std::to_string(spec.targets.size()) +
                           " targets; give a list with one options object per target, in the same order");
  FCB_RETURN_IF_ERROR(ValidateSpec(spec));
  return spec;
}

}  // namespace fcb
