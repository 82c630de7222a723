// The loop the end-to-end tests share: a compiled file loaded forced to each
// target this host can run, one after the other. Public API only (a header,
// so the layer tests that link test_util.cc without the runtime do not need it).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "fcb/fcb.h"
#include "fcb/inspect.h"

namespace fcb::testing {

// Calls fn(target name, program) for every target of ListTargets() this host
// runs, with `file` loaded forced to it, under a SCOPED_TRACE naming the
// target; a load that fails is a test failure. Returns how many targets ran.
template <typename Fn>
int ForEachRunnableTarget(const std::string& file, Fn&& fn) {
  int ran = 0;
  for (const auto& t : ListTargets()) {
    if (!t.host_can_run) continue;
    SCOPED_TRACE(t.name);
    LoadOptions lo;
    lo.target = t.name;
    auto program = Program::Load(file, lo);
    EXPECT_TRUE(program.ok()) << program.status().message();
    if (!program.ok()) continue;
    EXPECT_EQ(program.value()->target(), t.name);
    fn(t.name, program.value());
    ++ran;
  }
  return ran;
}

}  // namespace fcb::testing
