// Internal operator names and the plan's internal attribute names are spelled
// in one place, src/ops/names.h: every other file (library, tools, tests) uses
// its constants. This test reads every source file of the repository and
// fails on a string literal spelling one of them anywhere else.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ops/names.h"

namespace {

std::vector<std::string> InternalNames() {
  std::vector<std::string> v;
#define FCB_NAME_OF_OP(op, def) v.push_back(std::string(fcb::ops::opname::op));
  FCB_INTERNAL_OPS(FCB_NAME_OF_OP)
#undef FCB_NAME_OF_OP
#define FCB_NAME_OF_ATTR(id, spelling, internal) \
  if (internal) v.push_back(spelling);
  FCB_PLAN_ATTRS(FCB_NAME_OF_ATTR)
#undef FCB_NAME_OF_ATTR
  return v;
}

TEST(Names, InternalNamesAreSpelledOnlyInNamesH) {
  namespace fs = std::filesystem;
  const fs::path root = FCB_SOURCE_DIR;
  const auto names = InternalNames();
  ASSERT_GE(names.size(), 8u);
  int files = 0;
  std::vector<std::string> hits;
  for (const char* dir : {"src", "tests", "bench", "conformance", "examples", "include"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      if (e.path() == root / "src/ops/names.h") continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      ++files;
      for (const auto& n : names)
        if (text.find('"' + n + '"') != std::string::npos)
          hits.push_back(fs::relative(e.path(), root).string() + " spells \"" + n + "\"");
    }
  }
  EXPECT_GT(files, 100) << "the source tree was not found at " << root;
  for (const auto& h : hits) ADD_FAILURE() << h << "; use the constant from src/ops/names.h";
}

// The check itself finds a literal (a test that could never fail is no test).
TEST(Names, TheCheckSeesALiteral) {
  const std::string sample = std::string("x = \"") + std::string(fcb::ops::opname::GemmPacked) + "\";";
  EXPECT_NE(sample.find('"' + std::string(fcb::ops::opname::GemmPacked) + '"'), std::string::npos);
}

}  // namespace
