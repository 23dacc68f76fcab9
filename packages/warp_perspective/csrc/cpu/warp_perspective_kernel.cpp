// The CPU kernels of warp_perspective's ops, all registered here: the public
// op (the built-in kernel, or OpenCV in a WARP_PERSPECTIVE_OPENCV=1 build),
// the built-in kernel and the backward
// (their sampling is in cpu/builtin_sampling.cpp), and the OpenCV backend,
// which calls cv::warpPerspective on every (image, channel) plane when the
// build has OpenCV.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "checks.h"
#include "cpu/parallel.h"
#include "homography.h"
#include "warp_perspective.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#ifdef WARP_PERSPECTIVE_WITH_OPENCV
// OpenCV 4's headers mix enum types in arithmetic, deprecated in C++20.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-enum-enum-conversion"
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgproc.hpp>
#pragma GCC diagnostic pop
#endif

namespace warp_perspective {

#ifdef WARP_PERSPECTIVE_WITH_OPENCV
namespace {

// OpenCV stores source coordinates as int16 in its remap tables, so it cannot
// address sources this large; they go to the built-in kernel.
constexpr int64_t kOpenCVMaxSide = 32000;
// Each plane is cut into bands of this many output rows, one task each, so
// that a single large image still spreads over every thread. Fixed, not
// derived from the thread count: a band is warped with a shifted matrix, and
// OpenCV's rounding of coordinates to 1/32 pixel must not make the result
// depend on torch.get_num_threads().
constexpr int64_t kBandRows = 64;

// OpenCV would parallelise every call over its own pool (TBB on Debian,
// pthreads in the PyPI wheels) on top of torch's threads, and it runs a
// parallel_for_ serially while another is in progress (a process-wide
// "nested" flag). So the batch runs inside one single-stripe parallel_for_
// (RunNested), whose body hands the bands to torch's intra-op threads: every
// cv::warpPerspective is then serial inside its task, torch.set_num_threads
// governs the op like any other, and cv::setNumThreads changes for nobody.
class RunNested : public cv::ParallelLoopBody {
 public:
  explicit RunNested(const std::function<void()>& fn) : fn_(fn) {}
  void operator()(const cv::Range&) const override {
    fn_();
  }

 private:
  const std::function<void()>& fn_;
};

int cv_type(ScalarType t) {
  return t == ScalarType::Byte ? CV_8UC1 : CV_32FC1;
}

}  // namespace

bool opencv_sampling_forward(const Problem& p,
                             const std::vector<std::array<double, 9>>& inverses,
                             Tensor& out) {
  const auto dtype = p.input.scalar_type();
  // float64 always takes the built-in kernel: OpenCV rounds source
  // coordinates to 1/32 pixel for bilinear sampling, which would defeat
  // double precision and make the forward disagree with its gradient (the
  // adjoint of exact sampling) by more than gradcheck tolerates.
  if ((dtype != ScalarType::Float && dtype != ScalarType::Byte) ||
      p.src_h >= kOpenCVMaxSide || p.src_w >= kOpenCVMaxSide ||
      p.dst_h >= kOpenCVMaxSide || p.dst_w >= kOpenCVMaxSide) {
    return false;
  }
  // cv::Mat rows must be contiguous and must not overlap (a row step of 0,
  // as in an expanded image, means "rows packed" to cv::Mat); any other
  // layout is copied once.
  const bool mat_layout =
      p.input.stride(3) == 1 && (p.src_h == 1 || p.input.stride(2) >= p.src_w);
  const Tensor src = mat_layout ? p.input : torch::stable::contiguous(p.input);
  const int64_t batch = src.size(0);
  const int64_t channels = src.size(1);
  const int64_t planes = batch * channels;
  const int64_t band_rows = kBandRows;
  const int64_t bands = (p.dst_h + band_rows - 1) / band_rows;
  const int type = cv_type(dtype);
  const size_t elem = src.element_size();
  const int flags =
      cv::WARP_INVERSE_MAP |
      (p.interpolation == Interpolation::kNearest ? cv::INTER_NEAREST
                                                  : cv::INTER_LINEAR);
  const int border = p.padding == Padding::kBorder ? cv::BORDER_REPLICATE
                                                   : cv::BORDER_CONSTANT;
  char* out_base = static_cast<char*>(out.mutable_data_ptr());
  const char* src_base = static_cast<const char*>(src.const_data_ptr());

  const std::function<void()> run = [&] {
    cpu::run_workers(planes * bands, 1, [&](cpu::ChunkQueue& queue) {
      int64_t task = 0;
      int64_t task_end = 0;
      while (queue.pop(task, task_end)) {
        const int64_t plane = task / bands;
        const int64_t b = plane / channels;
        const int64_t c = plane % channels;
        const int64_t y0 = (task % bands) * band_rows;
        const int64_t rows = std::min(band_rows, p.dst_h - y0);
        // The plane as a Mat over the tensor's memory (OpenCV does not
        // write to its source, the const_cast only satisfies cv::Mat).
        const cv::Mat in(static_cast<int>(p.src_h),
                         static_cast<int>(p.src_w),
                         type,
                         const_cast<char*>(src_base) +
                             (b * src.stride(0) + c * src.stride(1)) * elem,
                         p.src_h == 1
                             ? static_cast<size_t>(cv::Mat::AUTO_STEP)
                             : static_cast<size_t>(src.stride(2)) * elem);
        // The band of output rows [y0, y0 + rows) is itself a warp whose
        // inverse map sees row y' = y - y0: shift the last column.
        const double* inv = inverses[inverses.size() == 1 ? 0 : b].data();
        cv::Matx33d m(inv);
        m(0, 2) += y0 * inv[1];
        m(1, 2) += y0 * inv[4];
        m(2, 2) += y0 * inv[7];
        cv::Mat dst(static_cast<int>(rows),
                    static_cast<int>(p.dst_w),
                    type,
                    out_base + ((plane * p.dst_h + y0) * p.dst_w) * elem);
        try {
          cv::warpPerspective(
              in, dst, m, dst.size(), flags, border, cv::Scalar::all(0));
        } catch (const cv::Exception& e) {
          fail("warp_perspective: OpenCV failed: ", e.what());
        }
        // warpPerspective writes into dst's memory (our output), never
        // reallocates it: same size and type.
        SHARED_BUILD_CHECK(
            dst.data ==
                reinterpret_cast<uchar*>(
                    out_base + ((plane * p.dst_h + y0) * p.dst_w) * elem),
            "warp_perspective: internal error: OpenCV reallocated "
            "its output");
      }
    });
  };
  cv::parallel_for_(cv::Range(0, 1), RunNested(run));
  return true;
}

const char* cpu_backend() {
  return "opencv";
}

constexpr bool kHaveOpenCV = true;

const char* opencv_version() {
  return CV_VERSION;
}

#else  // no OpenCV in this build

bool opencv_sampling_forward(const Problem&,
                             const std::vector<std::array<double, 9>>&,
                             Tensor&) {
  return false;
}

const char* cpu_backend() {
  return "builtin";
}

constexpr bool kHaveOpenCV = false;

const char* opencv_version() {
  return "";
}

#endif

// The built-in kernel is the default: it is several times faster than
// cv::warpPerspective called per plane (README, Benchmark). A build made with
// WARP_PERSPECTIVE_OPENCV=1 asks for OpenCV's results instead.
const char* cpu_default_backend() {
#ifdef WARP_PERSPECTIVE_OPENCV_DEFAULT
  return "opencv";
#else
  return "builtin";
#endif
}

namespace {

std::string format_matrix(const double* m) {
  std::ostringstream s;
  s << "[[" << m[0] << ", " << m[1] << ", " << m[2] << "], [" << m[3] << ", "
    << m[4] << ", " << m[5] << "], [" << m[6] << ", " << m[7] << ", " << m[8]
    << "]]";
  return s.str();
}

// The inverse of every matrix of warp (on the CPU), in double, row-major;
// throws naming the matrix when one is singular or not finite. The CUDA
// kernels invert on the device instead (no synchronisation) and write zeros.
std::vector<std::array<double, 9>> inverse_warps(const Tensor& warp) {
  // Read in place, any strides, float or double: every call into torch's
  // dispatcher costs about a microsecond here.
  const Tensor& host = warp;
  const int64_t dim = host.dim();
  const int64_t count = dim == 3 ? host.size(0) : 1;
  const int64_t stride_b = dim == 3 ? host.stride(0) : 0;
  const int64_t stride_r = host.stride(dim - 2);
  const int64_t stride_c = host.stride(dim - 1);
  const bool is_double = host.scalar_type() == ScalarType::Double;
  const void* data = host.const_data_ptr();
  std::vector<std::array<double, 9>> inverses(count);
  for (int64_t i = 0; i < count; ++i) {
    double mi[9];
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t at = i * stride_b + r * stride_r + c * stride_c;
        mi[3 * r + c] = is_double ? static_cast<const double*>(data)[at]
                                  : static_cast<const float*>(data)[at];
      }
    }
    if (!invert3x3(mi, inverses[i].data())) {
      bool finite = true;
      for (int k = 0; k < 9; ++k) {
        finite = finite && (mi[k] - mi[k] == 0.0);
      }
      SHARED_BUILD_CHECK(finite,
                         "warp_perspective: warp matrix ",
                         i,
                         " has a non-finite entry: ",
                         format_matrix(mi));
      fail("warp_perspective: warp matrix ",
           i,
           " is singular (or nearly: |det| <= ",
           kSingularRatio,
           " x the product of its row norms): ",
           format_matrix(mi),
           "; a homography must be invertible");
    }
  }
  return inverses;
}

#if defined(__linux__) && defined(MADV_HUGEPAGE) && \
    !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels say EINVAL
#endif

// An empty contiguous tensor of like's dtype and device, with the memory
// advised for transparent huge pages when it is large, and those pages mapped
// before the kernels write them.
//
// A fresh output of a few hundred MB takes tens of thousands of 4 KB page
// faults on first touch, which can cost more than the warp; huge pages take a
// 512th of them (where THP is in "madvise" mode, the common default; torch
// does the same for every allocation with THP_MEM_ALLOC_ENABLE=1). A huge page
// is zeroed by the thread that first touches it while any other thread
// touching it waits, and two threads' row chunks often share one; so with
// several threads each first populates its own range of whole pages
// (MADV_POPULATE_WRITE). With one thread, faulting as the kernel writes is
// cheaper: the zeroed lines are still in cache when they are written.
Tensor empty_output(const Tensor& like, const std::vector<int64_t>& sizes) {
  Tensor out = torch::stable::new_empty(like, sizes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr size_t kHugePage = size_t(2) << 20;
  const size_t bytes = static_cast<size_t>(out.numel()) * out.element_size();
  if (bytes >= 4 * kHugePage) {
    // Advise the 2 MB-aligned interior; the untouched pages are ours alone.
    const auto start = reinterpret_cast<uintptr_t>(out.data_ptr());
    const uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
    const uintptr_t last = (start + bytes) & ~(kHugePage - 1);
    if (last > first) {
      madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
      if (torch::stable::get_num_threads() == 1) {
        return out;
      }
      const auto pages = static_cast<int64_t>((last - first) / kHugePage);
      torch::stable::parallel_for(0, pages, 8, [&](int64_t begin, int64_t end) {
        madvise(reinterpret_cast<void*>(first + begin * kHugePage),
                (end - begin) * kHugePage,
                MADV_POPULATE_WRITE);
      });
    }
  }
#endif
  return out;
}

Tensor forward_with_backend(const Tensor& image,
                            const Tensor& warp,
                            const std::optional<std::vector<int64_t>>& dsize,
                            const std::string& interpolation,
                            const std::string& padding_mode,
                            bool use_opencv) {
  check_forward(image, warp, dsize, interpolation, padding_mode);
  const Problem p =
      forward_problem(image, warp, dsize, interpolation, padding_mode);
  SHARED_BUILD_CHECK(image.is_cpu(),
                     "warp_perspective: the CPU kernel got tensors on ",
                     device_name(image));
  const auto inverses = inverse_warps(p.warp);
  // In the caller's layout; contiguous, so its memory is the (B, C, dst_h,
  // dst_w) the kernels write.
  Tensor out = empty_output(image, p.result_sizes);
  // opencv_sampling_forward declines float64 and sources too large for
  // OpenCV: those take the built-in sampling whichever backend was asked for.
  if (out.numel() > 0 &&
      !(use_opencv && opencv_sampling_forward(p, inverses, out))) {
    builtin_sampling_forward(p, inverses, out);
  }
  return out;
}

#ifdef WARP_PERSPECTIVE_OPENCV_DEFAULT
constexpr bool kDefaultOpenCV = true;
#else
constexpr bool kDefaultOpenCV = false;
#endif

Tensor warp_perspective_kernel(const Tensor& image,
                               const Tensor& warp,
                               std::optional<std::vector<int64_t>> dsize,
                               StrArg interpolation,
                               StrArg padding_mode) {
  return forward_with_backend(image,
                              warp,
                              dsize,
                              interpolation.value,
                              padding_mode.value,
                              kDefaultOpenCV);
}

// The built-in kernel whatever the build's default (backend="builtin").
Tensor warp_perspective_builtin_kernel(
    const Tensor& image,
    const Tensor& warp,
    std::optional<std::vector<int64_t>> dsize,
    StrArg interpolation,
    StrArg padding_mode) {
  return forward_with_backend(
      image, warp, dsize, interpolation.value, padding_mode.value, false);
}

Tensor warp_perspective_backward_kernel(const Tensor& grad_output,
                                        const Tensor& warp,
                                        std::vector<int64_t> image_size,
                                        StrArg interpolation,
                                        StrArg padding_mode) {
  check_backward(
      grad_output, warp, image_size, interpolation.value, padding_mode.value);
  const Problem p = backward_problem(
      grad_output, warp, image_size, interpolation.value, padding_mode.value);
  SHARED_BUILD_CHECK(
      grad_output.is_cpu(),
      "warp_perspective_backward: the CPU kernel got tensors on ",
      device_name(grad_output));
  const auto inverses = inverse_warps(p.warp);
  // In the caller's layout, contiguous: (B, C, src_h, src_w) in memory.
  Tensor grad_image = empty_output(grad_output, p.result_sizes);
  torch::stable::zero_(grad_image);
  if (grad_image.numel() > 0 && grad_output.numel() > 0) {
    builtin_sampling_backward(p, inverses, grad_image);
  }
  return grad_image;
}

Tensor warp_perspective_opencv_kernel(const Tensor& image,
                                      const Tensor& warp,
                                      std::optional<std::vector<int64_t>> dsize,
                                      StrArg interpolation,
                                      StrArg padding_mode) {
  SHARED_BUILD_CHECK(
      kHaveOpenCV,
      "warp_perspective: backend=\"opencv\" was asked for, but this "
      "build has no OpenCV; install libopencv-dev (pkg-config "
      "opencv4) and rebuild, or use the default backend");
  return forward_with_backend(
      image, warp, dsize, interpolation.value, padding_mode.value, true);
}

}  // namespace
}  // namespace warp_perspective

// Every CPU kernel of the library's ops, registered here.
STABLE_TORCH_LIBRARY_IMPL(warp_perspective, CPU, m) {
  m.impl("warp_perspective",
         TORCH_BOX(&warp_perspective::warp_perspective_kernel));
  m.impl("_warp_perspective_builtin",
         TORCH_BOX(&warp_perspective::warp_perspective_builtin_kernel));
  m.impl("warp_perspective_backward",
         TORCH_BOX(&warp_perspective::warp_perspective_backward_kernel));
  m.impl("_warp_perspective_opencv",
         TORCH_BOX(&warp_perspective::warp_perspective_opencv_kernel));
}
