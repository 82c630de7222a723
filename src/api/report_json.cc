// The JSON form of a CompileReport (fcb/fcb.h), the one every front end
// returns: the C API's fcb_compile report and the Python fcb.compile() report.
#include <nlohmann/json.hpp>

#include "fcb/fcb.h"

namespace fcb {

std::string CompileReportJson(const CompileReport& r, int indent) {
  using nlohmann::ordered_json;
  ordered_json accuracy = ordered_json::array();
  for (const auto& a : r.int8_accuracy) {
    // NaN (not measured) has no JSON form: null, with the error beside it.
    const ordered_json rel_l2 = a.error.empty() ? ordered_json(a.rel_l2) : ordered_json(nullptr);
    accuracy.push_back({{"method", a.method},
                        {"target", a.target},
                        {"on_int8_target", a.on_int8_target},
                        {"int8_targets", a.int8_targets},
                        {"inputs", a.inputs},
                        {"float_outputs", a.float_outputs},
                        {"rel_l2", rel_l2},
                        {"error", a.error}});
  }
  const ordered_json j = {{"file_size", r.file_size}, {"warnings", r.warnings}, {"int8_accuracy", accuracy}};
  // Names and messages come from model files: invalid UTF-8 is replaced, never thrown on.
  return j.dump(indent < 0 ? -1 : indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace fcb
