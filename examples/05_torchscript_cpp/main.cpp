// Runs a TorchScript model that calls
// torch.ops.warp_perspective.warp_perspective, without Python: the op comes
// from the op library linked into this program.
//
//   warp_app model.pt inputs.pt output.pt
//
// inputs.pt is a dict {"image": Tensor, "warp": Tensor} saved with torch.save;
// the result is written with torch::jit::pickle_save, which torch.load reads.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/script.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <vector>

namespace {

std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error(std::string("cannot open ") + path);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " model.pt inputs.pt output.pt\n";
    return 2;
  }
  try {
    std::cout << "C++: _GLIBCXX_USE_CXX11_ABI=" << _GLIBCXX_USE_CXX11_ABI
              << "\n";
    // Registered by the op library's static initialisers at program start.
    const bool registered =
        c10::Dispatcher::singleton()
            .findSchema({"warp_perspective::warp_perspective", ""})
            .has_value();
    std::cout << "C++: warp_perspective::warp_perspective registered: "
              << (registered ? "yes" : "no") << "\n";
    if (!registered) {
      return 1;
    }
    torch::jit::Module model = torch::jit::load(argv[1]);
    model.eval();
    const c10::Dict<c10::IValue, c10::IValue> inputs =
        torch::jit::pickle_load(read_file(argv[2])).toGenericDict();
    const at::Tensor image = inputs.at("image").toTensor();
    const at::Tensor warp = inputs.at("warp").toTensor();

    const torch::NoGradGuard no_grad;
    const at::Tensor out = model.forward({image, warp}).toTensor();
    std::cout << "C++: output shape " << out.sizes() << ", dtype "
              << out.scalar_type() << ", sum " << std::fixed
              << std::setprecision(6) << out.sum(at::kDouble).item<double>()
              << "\n";

    const std::vector<char> bytes = torch::jit::pickle_save(out);
    std::ofstream(argv[3], std::ios::binary).write(bytes.data(), bytes.size());
    std::cout << "C++: wrote " << argv[3] << "\n";
  } catch (const std::exception& e) {
    std::cerr << "C++: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
