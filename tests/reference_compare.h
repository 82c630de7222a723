// Comparing a run's outputs with reference outputs (ONNX Runtime's, read
// with testing::ReadNpyFolder): the one check of the model tests that run
// CASE.feeds through fcb and compare with CASE.ref.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fcb/fcb.h"
#include "fcb/npy.h"
#include "test_util.h"

namespace fcb::testing {

// Every output of `ex`'s last run has a reference in `want` (as many as
// outputs), this run's shape, float32 elements, and a relative L2 error of at
// most `max_rel_l2`; failures name the output and `context`. Adds the outputs
// compared to *compared. Call it under ASSERT_NO_FATAL_FAILURE.
inline void ExpectOutputsMatch(const Execution& ex, const std::map<std::string, NpyArray>& want, double max_rel_l2,
                               const std::string& context, int* compared) {
  const auto& outs = ex.info().outputs;
  ASSERT_EQ(outs.size(), want.size()) << context;
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& o = outs[i];
    auto w = want.find(o.name);
    ASSERT_NE(w, want.end()) << "output " << o.name << " has no reference; " << context;
    ASSERT_EQ(ex.output_shape(i), w->second.shape) << o.name << ", " << context;
    ASSERT_EQ(o.dtype, DType::kF32) << o.name << ", " << context;
    std::vector<float> got(ex.output_bytes(i) / 4), ref(w->second.data.size() / 4);
    std::memcpy(got.data(), ex.output_data(i), got.size() * 4);
    std::memcpy(ref.data(), w->second.data.data(), ref.size() * 4);
    EXPECT_LE(Compare(got, ref).rel_l2, max_rel_l2) << "output " << o.name << ", " << context;
    ++*compared;
  }
}

}  // namespace fcb::testing
