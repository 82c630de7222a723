// A main() for the fuzz targets in builds without libFuzzer: runs
// LLVMFuzzerTestOneInput once on every file named on the command line, and on
// every file inside each folder named (not recursive), in name order. This is
// how ctest replays the kept findings and the seeds (fuzz/CMakeLists.txt). A
// crash, a sanitizer report or an abort fails the test; so does a folder with
// no files (a replay that replays nothing asserts nothing).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      size_t before = files.size();
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
      if (files.size() == before) {
        std::fprintf(stderr, "error: %s holds no files to replay\n", argv[i]);
        return 2;
      }
      std::sort(files.begin() + before, files.end());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "error: %s is neither a file nor a folder\n", argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "error: cannot read %s\n", f.c_str());
      return 2;
    }
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("replayed %zu inputs, no crash\n", files.size());
  return 0;
}
