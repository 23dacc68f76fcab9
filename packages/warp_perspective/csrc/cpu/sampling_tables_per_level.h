// ---- Tables: float64, the backward (sampling_per_level.h's end; no guard) --
//
// For one destination row, every pixel's tap offsets, weights and the mask of
// its taps inside the image (RowTaps), kLanes pixels at a time, the
// coordinates without fused multiply-adds (madd) and the weights in double,
// rounded to weight_t when stored. With zeros padding an outside tap gets
// weight 0 and offset 0 and its bit in the mask stays clear (zeros padding is
// separable: a tap is inside when its column and its row are); with border
// padding taps are clamped into the image and every bit is set. The tables
// hold whole groups (table_size): the lanes past the row repeat its last
// pixel.

template <typename weight_t>
C10_ALWAYS_INLINE void store_weights(weight_t* p,
                                     Vec::M inside,
                                     const Vec::D (&a)[2],
                                     const Vec::D (&b)[2]) {
  const Vec::D w[2] = {Vec::dmul(a[0], b[0]), Vec::dmul(a[1], b[1])};
  if constexpr (std::is_same_v<weight_t, float>) {
    Vec::store(p,
               Vec::tail(Vec::kLanes),
               Vec::zero_unless(inside, Vec::to_float(w[0], w[1])));
  } else {
    Vec::dstore(p, Vec::dzero_unless(inside, 0, w[0]));
    Vec::dstore(p + Vec::kLanes / 2, Vec::dzero_unless(inside, 1, w[1]));
  }
}

// The source's sizes, last indices and strides in every lane: what the tables
// clamp, test and scale the taps with.
struct SourceBounds {
  explicit SourceBounds(const Geometry& g)
      : size_x(Vec::iset(static_cast<int>(g.src_w))),
        size_y(Vec::iset(static_cast<int>(g.src_h))),
        last_x(Vec::iset(static_cast<int>(g.src_w - 1))),
        last_y(Vec::iset(static_cast<int>(g.src_h - 1))),
        sw(Vec::iset(g.stride_w)),
        sh(Vec::iset(g.stride_h)) {}
  Vec::I size_x, size_y, last_x, last_y, sw, sh;
};

template <bool kBorder, typename weight_t>
void bilinear_tables(const Geometry& g, RowTaps<weight_t>& t) {
  const RowCoeffs k = row_coeffs(g);
  const SourceBounds b(g);
  const Vec::I one = Vec::iset(1);
  const Vec::D done = Vec::dset(1.0);
  for (int64_t x0 = 0; x0 < g.n; x0 += Vec::kLanes) {
    Vec::D sx[2], sy[2], fx[2], fy[2];
    // The far column's and row's weights (ax, ay) and the near ones' (bx, by).
    Vec::D ax[2], ay[2], bx[2], by[2];
    group_coords<false>(k, x0, sx, sy);
    for (int half = 0; half < 2; ++half) {
      fx[half] = Vec::dfloor(sx[half]);
      fy[half] = Vec::dfloor(sy[half]);
      ax[half] = Vec::dsub(sx[half], fx[half]);
      ay[half] = Vec::dsub(sy[half], fy[half]);
      bx[half] = Vec::dsub(done, ax[half]);
      by[half] = Vec::dsub(done, ay[half]);
    }
    Vec::I ix0 = Vec::to_int(fx[0], fx[1]);
    Vec::I iy0 = Vec::to_int(fy[0], fy[1]);
    Vec::I ix1 = Vec::iadd(ix0, one);
    Vec::I iy1 = Vec::iadd(iy0, one);
    Vec::M m00 = Vec::every(), m01 = m00, m10 = m00, m11 = m00;
    if constexpr (kBorder) {
      ix0 = Vec::clamp(ix0, b.last_x);
      ix1 = Vec::clamp(ix1, b.last_x);
      iy0 = Vec::clamp(iy0, b.last_y);
      iy1 = Vec::clamp(iy1, b.last_y);
    } else {
      const Vec::M vx0 = Vec::inside(ix0, b.size_x);
      const Vec::M vx1 = Vec::inside(ix1, b.size_x);
      const Vec::M vy0 = Vec::inside(iy0, b.size_y);
      const Vec::M vy1 = Vec::inside(iy1, b.size_y);
      m00 = Vec::mand(vx0, vy0);
      m01 = Vec::mand(vx1, vy0);
      m10 = Vec::mand(vx0, vy1);
      m11 = Vec::mand(vx1, vy1);
      ix0 = Vec::izero_unless(vx0, ix0);
      ix1 = Vec::izero_unless(vx1, ix1);
      iy0 = Vec::izero_unless(vy0, iy0);
      iy1 = Vec::izero_unless(vy1, iy1);
    }
    const Vec::I r0 = Vec::imul(iy0, b.sh);
    const Vec::I r1 = Vec::imul(iy1, b.sh);
    const Vec::I c0 = Vec::imul(ix0, b.sw);
    const Vec::I c1 = Vec::imul(ix1, b.sw);
    Vec::istore(t.o00.data() + x0, Vec::iadd(r0, c0));
    Vec::istore(t.o01.data() + x0, Vec::iadd(r0, c1));
    Vec::istore(t.o10.data() + x0, Vec::iadd(r1, c0));
    Vec::istore(t.o11.data() + x0, Vec::iadd(r1, c1));
    store_weights(t.w00.data() + x0, m00, by, bx);
    store_weights(t.w01.data() + x0, m01, by, ax);
    store_weights(t.w10.data() + x0, m10, ay, bx);
    store_weights(t.w11.data() + x0, m11, ay, ax);
    const Vec::I bits =
        Vec::iadd(Vec::iadd(Vec::izero_unless(m00, Vec::iset(1)),
                            Vec::izero_unless(m01, Vec::iset(2))),
                  Vec::iadd(Vec::izero_unless(m10, Vec::iset(4)),
                            Vec::izero_unless(m11, Vec::iset(8))));
    Vec::store_bytes(t.mask.data() + x0, bits);
  }
}

// Nearest: one offset per pixel (o00), rounded half to even as OpenCV's
// cvRound; with zeros padding an outside tap gets offset 0 and mask 0.
template <bool kBorder, typename weight_t>
void nearest_tables(const Geometry& g, RowTaps<weight_t>& t) {
  const RowCoeffs k = row_coeffs(g);
  const SourceBounds b(g);
  for (int64_t x0 = 0; x0 < g.n; x0 += Vec::kLanes) {
    Vec::D sx[2], sy[2];
    group_coords<false>(k, x0, sx, sy);
    Vec::I ix = Vec::to_int(Vec::dround(sx[0]), Vec::dround(sx[1]));
    Vec::I iy = Vec::to_int(Vec::dround(sy[0]), Vec::dround(sy[1]));
    Vec::M inside = Vec::every();
    if constexpr (kBorder) {
      ix = Vec::clamp(ix, b.last_x);
      iy = Vec::clamp(iy, b.last_y);
    } else {
      inside = Vec::mand(Vec::inside(ix, b.size_x), Vec::inside(iy, b.size_y));
      ix = Vec::izero_unless(inside, ix);
      iy = Vec::izero_unless(inside, iy);
    }
    Vec::istore(t.o00.data() + x0,
                Vec::iadd(Vec::imul(iy, b.sh), Vec::imul(ix, b.sw)));
    Vec::store_bytes(t.mask.data() + x0,
                     Vec::izero_unless(inside, Vec::iset(kAllTapsInside)));
  }
}

template <bool kBorder, bool kNearest, typename weight_t>
C10_ALWAYS_INLINE void row_tables(const Geometry& g, RowTaps<weight_t>& t) {
  if constexpr (kNearest) {
    nearest_tables<kBorder>(g, t);
  } else {
    bilinear_tables<kBorder>(g, t);
  }
}

// The float64 forward of one row of every channel: the row's taps into tables,
// then each channel gathered from them; with zeros padding the pixels with a
// tap outside the image are recomputed from their inside taps.
template <typename scalar_t, bool kBorder, bool kNearest>
void table_row(const RowJob<scalar_t>& job, RowScratch<scalar_t>& s) {
  const int64_t n = job.g.n;
  RowTaps<scalar_t>& t = s.taps;
  row_tables<kBorder, kNearest>(job.g, t);
  if constexpr (!kBorder) {
    find_outside(t.mask.data(), n, s.outside);
  }
  for (int64_t c = 0; c < job.channels; ++c) {
    const scalar_t* plane = job.src + c * job.src_stride_c;
    scalar_t* out = job.out + c * job.out_stride_c;
    if constexpr (kNearest) {
      nearest_gather_loop(plane, t.o00.data(), out, n);
    } else {
      bilinear_gather_loop(plane,
                           t.o00.data(),
                           t.o01.data(),
                           t.o10.data(),
                           t.o11.data(),
                           t.w00.data(),
                           t.w01.data(),
                           t.w10.data(),
                           t.w11.data(),
                           out,
                           n);
    }
    if constexpr (!kBorder) {
      fix_outside_taps<kNearest>(t, s.outside, plane, out);
    }
  }
}

// The backward of one destination row of one plane, the adjoint of the
// forward: grad_image[tap] += weight * grad[pixel] for every tap inside the
// image, serially (deterministic).
template <typename scalar_t, bool kBorder, bool kNearest>
void backward_row(const Geometry& g,
                  const scalar_t* grad,
                  int64_t grad_stride,
                  scalar_t* grad_image,
                  RowTaps<scalar_t>& t) {
  row_tables<kBorder, kNearest>(g, t);
  // The tables through restrict pointers: else every store to grad_image
  // (the weights' type) makes the compiler reload them.
  const uint8_t* __restrict__ mask = t.mask.data();
  const index_t* __restrict__ o00 = t.o00.data();
  const index_t* __restrict__ o01 = t.o01.data();
  const index_t* __restrict__ o10 = t.o10.data();
  const index_t* __restrict__ o11 = t.o11.data();
  const scalar_t* __restrict__ w00 = t.w00.data();
  const scalar_t* __restrict__ w01 = t.w01.data();
  const scalar_t* __restrict__ w10 = t.w10.data();
  const scalar_t* __restrict__ w11 = t.w11.data();
  scalar_t* __restrict__ gi = grad_image;
  for (int64_t i = 0; i < g.n; ++i) {
    const scalar_t v = grad[i * grad_stride];
    const uint8_t bits = mask[i];
    if constexpr (kNearest) {
      if (bits) {
        gi[o00[i]] += v;
      }
      continue;
    }
    if (bits & 1) {
      gi[o00[i]] += w00[i] * v;
    }
    if (bits & 2) {
      gi[o01[i]] += w01[i] * v;
    }
    if (bits & 4) {
      gi[o10[i]] += w10[i] * v;
    }
    if (bits & 8) {
      gi[o11[i]] += w11[i] * v;
    }
  }
}

// ---- This level's kernels -------------------------------------------------

template <typename scalar_t, bool kBorder, bool kNearest>
Kernels<scalar_t> mode_kernels() {
  Kernels<scalar_t> k;
  if constexpr (std::is_same_v<scalar_t, double>) {
    k.table = &table_row<scalar_t, kBorder, kNearest>;
  } else if constexpr (kNearest) {
    k.row = &nearest_row<scalar_t, kBorder>;
  } else {
    k.row = &bilinear_row<scalar_t, kBorder>;
  }
  if constexpr (!std::is_same_v<scalar_t, uint8_t>) {
    k.backward = &backward_row<scalar_t, kBorder, kNearest>;
  }
  return k;
}

// The kernels of this level for a dtype and mode, the function that
// builtin_sampling.cpp calls on the level it picked.
template <typename scalar_t>
Kernels<scalar_t> kernels(bool border, bool nearest) {
  if (border) {
    return nearest ? mode_kernels<scalar_t, true, true>()
                   : mode_kernels<scalar_t, true, false>();
  }
  return nearest ? mode_kernels<scalar_t, false, true>()
                 : mode_kernels<scalar_t, false, false>();
}
