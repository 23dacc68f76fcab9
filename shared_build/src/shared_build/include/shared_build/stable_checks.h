// The argument checks of stable-ABI ops (no c10): an error whose message is
// exactly the op's sentence, its pieces written as Python writes them.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/Layout.h>

#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace shared_build {

// Throws std::runtime_error (RuntimeError in Python) whose message is the
// arguments, with no function, file and line (STD_TORCH_CHECK adds them).
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream message;
  ((message << args), ...);
  throw std::runtime_error(message.str());
}

// Sizes written as torch writes them: [2, 3, 4].
struct Sizes {
  std::vector<int64_t> values;
};

inline std::ostream& operator<<(std::ostream& out, const Sizes& sizes) {
  out << "[";
  for (size_t i = 0; i < sizes.values.size(); ++i) {
    out << (i ? ", " : "") << sizes.values[i];
  }
  return out << "]";
}

inline Sizes sizes_of(const torch::stable::Tensor& t) {
  const auto s = t.sizes();
  return Sizes{std::vector<int64_t>(s.begin(), s.end())};
}

// cpu, cuda:0, meta ... as str(tensor.device) in Python.
inline std::string device_name(const torch::stable::Tensor& t) {
  using torch::headeronly::DeviceType;
  const auto device = t.device();
  const auto type = device.type();
  std::string name =
      type == DeviceType::CPU    ? "cpu"
      : type == DeviceType::CUDA ? "cuda"
      : type == DeviceType::Meta ? "meta"
      : type == DeviceType::XPU  ? "xpu"
      : type == DeviceType::MPS
          ? "mps"
          : "device type " + std::to_string(static_cast<int>(type));
  if (device.index() >= 0) {
    name += ":" + std::to_string(device.index());
  }
  return name;
}

// Strided, SparseCsr ... as c10 prints a layout; in the order of the enum,
// whose values the stable ABI fixes.
inline const char* layout_name(torch::headeronly::Layout layout) {
  static const char* const names[] = {"Strided",
                                      "Sparse",
                                      "SparseCsr",
                                      "Mkldnn",
                                      "SparseCsc",
                                      "SparseBsr",
                                      "SparseBsc",
                                      "Jagged"};
  const auto i = static_cast<size_t>(layout);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "unknown";
}

}  // namespace shared_build

// fail(...) unless cond: SHARED_BUILD_CHECK(x.dim() == 2, "op: x must be ...").
#define SHARED_BUILD_CHECK(cond, ...)    \
  do {                                   \
    if (!(cond)) {                       \
      ::shared_build::fail(__VA_ARGS__); \
    }                                    \
  } while (false)
