// Compiles a model with the installed library, loads it and runs it.
// usage: consumer MODEL.onnx OUT.fcb
#include <cstdio>
#include <vector>

#include <fcb/fcb.h>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  fcb::CompileSpec spec;
  spec.targets = {"generic", "x86-64-v2"};
  spec.input_shapes["input"] = {1, 3, 64, 64};
  auto report = fcb::Compile(argv[1], spec, argv[2]);
  if (!report.ok()) return std::fprintf(stderr, "error: %s\n", report.status().message().c_str()), 1;
  auto program = fcb::Program::Load(argv[2]);
  if (!program.ok()) return std::fprintf(stderr, "error: %s\n", program.status().message().c_str()), 1;
  auto ex = fcb::Execution::Create(program.value(), "main", 1);
  if (!ex.ok()) return 1;
  std::vector<float> input(3 * 64 * 64, 0.5f);
  if (!ex.value()->SetInput("input", input.data(), input.size() * 4).ok()) return 1;
  if (!ex.value()->Run().ok()) return 1;
  const float* out = static_cast<const float*>(ex.value()->output_data(0));
  double sum = 0;
  for (int i = 0; i < 10; ++i) sum += out[i];
  std::printf("target %s, softmax sum %.6f\n", program.value()->target().c_str(), sum);
  return (sum > 0.999 && sum < 1.001) ? 0 : 1;
}
