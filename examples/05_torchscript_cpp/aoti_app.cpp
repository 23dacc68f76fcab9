// Runs an AOTInductor package (.pt2, from torch.export) whose graph calls
// warp_perspective::warp_perspective, without Python. The compiled model calls
// the op through the dispatcher by name, so the op library must be loaded: it
// is linked into this program like in main.cpp.
//
//   aoti_app model.pt2 inputs.pt output.pt
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/script.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " model.pt2 inputs.pt output.pt\n";
    return 2;
  }
  try {
    std::ifstream in(argv[2], std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
    const c10::Dict<c10::IValue, c10::IValue> inputs =
        torch::jit::pickle_load(bytes).toGenericDict();

    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    const torch::NoGradGuard no_grad;
    const std::vector<at::Tensor> outs = loader.run(
        {inputs.at("image").toTensor(), inputs.at("warp").toTensor()});
    const at::Tensor& out = outs.at(0);
    std::cout << "C++ AOTInductor: output shape " << out.sizes() << ", dtype "
              << out.scalar_type() << ", sum " << std::fixed
              << std::setprecision(6) << out.sum(at::kDouble).item<double>()
              << "\n";
    const std::vector<char> saved = torch::jit::pickle_save(out);
    std::ofstream(argv[3], std::ios::binary).write(saved.data(), saved.size());
    std::cout << "C++ AOTInductor: wrote " << argv[3] << "\n";
  } catch (const std::exception& e) {
    std::cerr << "C++ AOTInductor: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
