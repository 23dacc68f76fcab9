// Every sampling loop of the built-in CPU kernel, written once over Vec (the
// vector width and its operations): the row kernels (float32, uint8; one
// destination row, every channel, the group's geometry kept in registers),
// then (sampling_tables_per_level.h) the tap tables and the backward. Included
// once per level, inside its namespace, after its Vec (sampling_avx512.h,
// sampling_avx2.h, sampling_portable.h): hence no #pragma once.

// The per-row constants of the source coordinates: x' = m0 x + bx, y' =
// m3 x + by, w = m6 x + bw for destination column x.
struct RowCoeffs {
  Vec::D m0, m3, m6, bx, by, bw, hi_x, hi_y, last;
};

inline RowCoeffs row_coeffs(const Geometry& g) {
  const double* m = g.inv;
  RowCoeffs k;
  k.m0 = Vec::dset(m[0]);
  k.m3 = Vec::dset(m[3]);
  k.m6 = Vec::dset(m[6]);
  k.bx = Vec::dset(m[1] * g.y + m[2]);
  k.by = Vec::dset(m[4] * g.y + m[5]);
  k.bw = Vec::dset(m[7] * g.y + m[8]);
  k.hi_x = Vec::dset(static_cast<double>(g.src_w) + 1.0);
  k.hi_y = Vec::dset(static_cast<double>(g.src_h) + 1.0);
  k.last = Vec::dset(static_cast<double>(g.n - 1));
  return k;
}

// a * b + c: rounded once with kFused (the row kernels), else the product and
// the sum rounded apart, as OpenCV and the float64 reference compute (the
// tables: then every level gives the same bits, FMA or not).
template <bool kFused>
C10_ALWAYS_INLINE Vec::D madd(Vec::D a, Vec::D b, Vec::D c) {
  if constexpr (kFused) {
    return Vec::dfmadd(a, b, c);
  } else {
    return Vec::dadd(Vec::dmul(a, b), c);
  }
}

// Source coordinates of the kLanes / 2 destination columns x, clamped to
// [-2, size + 1] as clamp_coordinate does (NaN to -2: the max returns its
// second operand when either is NaN); w == 0 maps to (0, 0) as in OpenCV.
template <bool kFused>
inline void coords(const RowCoeffs& k, Vec::D x, Vec::D& sx, Vec::D& sy) {
  const Vec::D w = Vec::recip_or_zero(madd<kFused>(k.m6, x, k.bw));
  sx = Vec::dmul(madd<kFused>(k.m0, x, k.bx), w);
  sy = Vec::dmul(madd<kFused>(k.m3, x, k.by), w);
  const Vec::D lo = Vec::dset(-2.0);
  sx = Vec::dmin(Vec::dmax(sx, lo), k.hi_x);
  sy = Vec::dmin(Vec::dmax(sy, lo), k.hi_y);
}

// The source coordinates of destination columns x0 .. x0 + kLanes - 1, in two
// halves; columns past the row's end are replaced by its last one: those
// lanes repeat a real pixel (so they pass or fail the window test as it does)
// and are never stored.
template <bool kFused = true>
inline void group_coords(const RowCoeffs& k,
                         int64_t x0,
                         Vec::D (&sx)[2],
                         Vec::D (&sy)[2]) {
  const Vec::D base = Vec::dset(static_cast<double>(x0));
  for (int half = 0; half < 2; ++half) {
    const Vec::D x = Vec::dmin(Vec::dadd(base, Vec::diota(half)), k.last);
    coords<kFused>(k, x, sx[half], sy[half]);
  }
}

// The taps of kLanes pixels: the top-left tap (ix, iy), unclamped, and the
// four weights, in float (products of the float fractions).
struct Bilinear {
  Vec::I ix, iy;
  Vec::F w00, w01, w10, w11;
};

C10_ALWAYS_INLINE Bilinear bilinear_taps(const RowCoeffs& k, int64_t x0) {
  Vec::D sx[2], sy[2];
  group_coords(k, x0, sx, sy);
  const Vec::D fx[2] = {Vec::dfloor(sx[0]), Vec::dfloor(sx[1])};
  const Vec::D fy[2] = {Vec::dfloor(sy[0]), Vec::dfloor(sy[1])};
  Bilinear t;
  t.ix = Vec::to_int(fx[0], fx[1]);
  t.iy = Vec::to_int(fy[0], fy[1]);
  const Vec::F ax =
      Vec::to_float(Vec::dsub(sx[0], fx[0]), Vec::dsub(sx[1], fx[1]));
  const Vec::F ay =
      Vec::to_float(Vec::dsub(sy[0], fy[0]), Vec::dsub(sy[1], fy[1]));
  const Vec::F one = Vec::fset(1.0f);
  const Vec::F bx = Vec::fsub(one, ax);
  const Vec::F by = Vec::fsub(one, ay);
  t.w00 = Vec::fmul(by, bx);
  t.w01 = Vec::fmul(by, ax);
  t.w10 = Vec::fmul(ay, bx);
  t.w11 = Vec::fmul(ay, ax);
  return t;
}

// The tap of kLanes pixels for nearest sampling, rounded half to even
// (cvRound).
C10_ALWAYS_INLINE void nearest_taps(const RowCoeffs& k,
                                    int64_t x0,
                                    Vec::I& ix,
                                    Vec::I& iy) {
  Vec::D sx[2], sy[2];
  group_coords(k, x0, sx, sy);
  ix = Vec::to_int(Vec::dround(sx[0]), Vec::dround(sx[1]));
  iy = Vec::to_int(Vec::dround(sy[0]), Vec::dround(sy[1]));
}

C10_ALWAYS_INLINE Vec::F blend_taps(const Bilinear& t,
                                    Vec::F v00,
                                    Vec::F v01,
                                    Vec::F v10,
                                    Vec::F v11) {
  Vec::F v = Vec::fmul(t.w00, v00);
  v = Vec::ffmadd(t.w01, v01, v);
  v = Vec::ffmadd(t.w10, v10, v);
  return Vec::ffmadd(t.w11, v11, v);
}

// Loads instead of gathers: for a near-identity warp (rectification,
// augmentation) the taps of kLanes neighbouring destination pixels lie within
// 2 * kLanes source columns on at most three rows. Such a group loads that
// window of each row with two unaligned loads, picks each pixel's taps with a
// two-table permute and each pixel's row with a blend; when no tap reaches the
// third row there is nothing to select, and when every left tap lies in the
// window's first kLanes columns one load and a one-table permute per tap do
// (one vpermps instead of two and a blend on AVX2, whose permutes take 8
// lanes). Other groups (near the border, steep rotation, strong zoom, rows
// that are not contiguous) gather, masked so that taps outside the image read
// nothing and contribute exactly 0 with zeros padding. Both paths blend the
// same weights in the same order, so a pixel's value does not depend on the
// path its group took.
//
// Where a group reads its taps from when it can use loads: the window of
// kWindow columns starting at column base, on rows row .. row + 1 (+ 1 for
// bilinear's bottom taps); lower marks the pixels whose tap row is row + 1.
struct Window {
  int64_t base;
  int64_t row;
  Vec::M lower;
  Vec::Index index;  // each pixel's (left) tap column - base
};

// Whether every pixel's taps (ix .. ix + span, iy .. iy + span), span 1 for
// bilinear and 0 for nearest, lie inside the source and within a window of
// kWindow columns and two tap rows, and if so where. Coordinates along a
// destination row are monotonic (away from w = 0), so the first and last
// pixels bound the group; every lane is checked against those bounds all the
// same.
template <int kSpan>
C10_ALWAYS_INLINE bool find_window(const Geometry& g,
                                   Vec::I ix,
                                   Vec::I iy,
                                   Window& win) {
  const int xlo = std::min(Vec::first_lane(ix), Vec::last_lane(ix));
  const int ylo = std::min(Vec::first_lane(iy), Vec::last_lane(iy));
  const Vec::I dx = Vec::isub(ix, Vec::iset(xlo));
  const Vec::I dy = Vec::isub(iy, Vec::iset(ylo));
  const Vec::M ok = Vec::mand(
      Vec::mand(Vec::le_unsigned(dx, Vec::iset(Vec::kWindow - 1 - kSpan)),
                Vec::le_unsigned(dy, Vec::iset(1))),
      Vec::mand(Vec::le_unsigned(
                    ix, Vec::iset(static_cast<int>(g.src_w - 1 - kSpan))),
                Vec::le_unsigned(
                    iy, Vec::iset(static_cast<int>(g.src_h - 1 - kSpan)))));
  if (!Vec::all(ok)) {
    return false;
  }
  // The window must not run past the row: slide it left at the right edge.
  win.base = std::min<int64_t>(xlo, g.src_w - Vec::kWindow);
  win.row = ylo;
  win.lower = Vec::eq(dy, Vec::iset(1));
  win.index = Vec::index(Vec::isub(ix, Vec::iset(static_cast<int>(win.base))));
  return true;
}

// The window of a row's group: elements index of the 2 * kLanes source
// elements from plane + offset.
template <typename scalar_t>
inline Vec::F pick(const scalar_t* plane, int64_t offset, const Vec::Index& i) {
  return Vec::pick(
      Vec::load(plane + offset), Vec::load(plane + offset + Vec::kLanes), i);
}

// The left and right taps of kLanes pixels on one row of a window, from
// plane + offset (the row's window): with kNarrow (every left tap within the
// window's first kLanes columns) each from one load, the right ones from one
// column further; else picked from the window's two loads.
template <bool kNarrow, typename scalar_t>
C10_ALWAYS_INLINE void row_taps(const scalar_t* plane,
                                int64_t offset,
                                const Vec::Index& i0,
                                const Vec::Index& i1,
                                Vec::F& left,
                                Vec::F& right) {
  if constexpr (kNarrow) {
    left = Vec::pick1(Vec::load(plane + offset), i0);
    right = Vec::pick1(Vec::load(plane + offset + 1), i0);
  } else {
    left = pick(plane, offset, i0);
    right = pick(plane, offset, i1);
  }
}

// Every channel of a group whose taps lie in a window (find_window): rows
// row and row + 1 of it, and row + 2 unless kTwoRows (no pixel's top tap on
// row + 1, so no pixel needs a row select).
template <bool kNarrow, bool kTwoRows, typename scalar_t>
C10_ALWAYS_INLINE void bilinear_window(const Bilinear& t,
                                       const Window& win,
                                       const RowJob<scalar_t>& job,
                                       int64_t sh,
                                       Vec::Tail keep,
                                       int64_t x0) {
  const Vec::Index i0 = win.index;
  const Vec::Index i1 = Vec::index(Vec::iadd(Vec::indices(i0), Vec::iset(1)));
  const int64_t r0 = win.row * sh + win.base;
  const int64_t r1 = r0 + sh;
  const int64_t r2 = r1 + sh;
  // Copies, as in bilinear_row.
  const scalar_t* const src = job.src;
  scalar_t* const out = job.out + x0;
  const int64_t channels = job.channels;
  const int64_t src_c = job.src_stride_c;
  const int64_t out_c = job.out_stride_c;
  for (int64_t c = 0; c < channels; ++c) {
    const scalar_t* plane = src + c * src_c;
    // The line that the rows two destination rows below will read. Along
    // a destination row a sheared or rotated warp crosses a source row
    // every few dozen pixels, a pattern the hardware prefetchers miss;
    // without this a 1080p batch spent half its time waiting for loads.
    prefetch_ahead(plane, r0 + kPrefetchRows * sh + 16);
    Vec::F p00, p01, p10, p11;
    row_taps<kNarrow>(plane, r0, i0, i1, p00, p01);
    row_taps<kNarrow>(plane, r1, i0, i1, p10, p11);
    Vec::F v;
    if constexpr (kTwoRows) {
      v = blend_taps(t, p00, p01, p10, p11);
    } else {
      Vec::F p20, p21;
      row_taps<kNarrow>(plane, r2, i0, i1, p20, p21);
      v = blend_taps(t,
                     Vec::select(win.lower, p00, p10),
                     Vec::select(win.lower, p01, p11),
                     Vec::select(win.lower, p10, p20),
                     Vec::select(win.lower, p11, p21));
    }
    Vec::store(out + c * out_c, keep, v);
  }
}

// Bilinear sampling of one row of every channel: the arithmetic of the tables
// below (bilinear_tables, then bilinear_gather_loop), with multiply-adds
// (Vec::dfmadd, Vec::ffmadd). Requires the image's planes to span fewer than
// 2^31 elements (int32 gather offsets), as the tables do.
template <typename scalar_t, bool kBorder>
void bilinear_row(const RowJob<scalar_t>& job) {
  // Copies: the masked stores below would otherwise make the compiler
  // reload every field of job for every channel.
  const Geometry g = job.g;
  const scalar_t* const src = job.src;
  scalar_t* const out_row = job.out;
  const int64_t channels = job.channels;
  const int64_t src_c = job.src_stride_c;
  const int64_t out_c = job.out_stride_c;
  const RowCoeffs k = row_coeffs(g);
  // Loads need whole rows of at least one window, contiguous.
  const bool loads = g.stride_w == 1 && g.src_w >= Vec::kWindow && g.src_h >= 2;
  const int64_t sh = g.stride_h;
  const Vec::I size_x = Vec::iset(static_cast<int>(g.src_w));
  const Vec::I size_y = Vec::iset(static_cast<int>(g.src_h));
  const Vec::I one = Vec::iset(1);
  Bilinear next = bilinear_taps(k, 0);
  for (int64_t x0 = 0; x0 < g.n; x0 += Vec::kLanes) {
    const Bilinear t = next;
    // The next group's geometry before this group's samples: its division
    // and conversions, a long chain of latency, then overlap the loads and
    // blends below instead of waiting for them.
    if (x0 + Vec::kLanes < g.n) {
      next = bilinear_taps(k, x0 + Vec::kLanes);
    }
    const Vec::Tail keep = Vec::tail(g.n - x0);
    scalar_t* out = out_row + x0;
    Window win;
    if (loads && find_window<1>(g, t.ix, t.iy, win)) {
      // Most groups of a near-identity warp need neither the third row (no
      // pixel's top tap is on row + 1) nor the window's second half (every
      // left tap in its first kLanes columns): one permute per tap instead of
      // two and a blend (AVX2), and no row selects.
      const bool two_rows = !Vec::any(win.lower);
      if (Vec::narrow(win.index)) {
        if (two_rows) {
          bilinear_window<true, true>(t, win, job, sh, keep, x0);
        } else {
          bilinear_window<true, false>(t, win, job, sh, keep, x0);
        }
      } else if (two_rows) {
        bilinear_window<false, true>(t, win, job, sh, keep, x0);
      } else {
        bilinear_window<false, false>(t, win, job, sh, keep, x0);
      }
      continue;
    }
    // Near the border, or too wide or steep for the window above. The taps
    // clamped into the image are what border padding reads; zeros padding
    // reads them too and zeroes the outside ones (masks k).
    const Vec::I last_x = Vec::isub(size_x, one);
    const Vec::I last_y = Vec::isub(size_y, one);
    const Vec::I ix1 = Vec::iadd(t.ix, one);
    const Vec::I iy1 = Vec::iadd(t.iy, one);
    Vec::M k00 = Vec::every(), k01 = Vec::every(), k10 = Vec::every(),
           k11 = Vec::every();
    if constexpr (!kBorder) {
      const Vec::M vx0 = Vec::inside(t.ix, size_x);
      const Vec::M vx1 = Vec::inside(ix1, size_x);
      const Vec::M vy0 = Vec::inside(t.iy, size_y);
      const Vec::M vy1 = Vec::inside(iy1, size_y);
      k00 = Vec::mand(vx0, vy0);
      k01 = Vec::mand(vx1, vy0);
      k10 = Vec::mand(vx0, vy1);
      k11 = Vec::mand(vx1, vy1);
    }
    const Vec::I cx0 = Vec::clamp(t.ix, last_x), cx1 = Vec::clamp(ix1, last_x);
    const Vec::I cy0 = Vec::clamp(t.iy, last_y), cy1 = Vec::clamp(iy1, last_y);
    if (loads) {
      // The border's groups: the clamped taps within a window of kWindow
      // columns and three rows, where a pixel's two tap rows may be the same
      // (clamped) and either may be any of the three.
      const int xlo = Vec::hmin(cx0);
      const int ylo = Vec::hmin(cy0);
      if (Vec::hmax(cx1) - xlo <= Vec::kWindow - 1 &&
          Vec::hmax(cy1) - ylo <= 2) {
        const int64_t base = std::min<int64_t>(xlo, g.src_w - Vec::kWindow);
        const Vec::I vbase = Vec::iset(static_cast<int>(base));
        const Vec::Index i0 = Vec::index(Vec::isub(cx0, vbase));
        const Vec::Index i1 = Vec::index(Vec::isub(cx1, vbase));
        const Vec::I vylo = Vec::iset(ylo);
        const Vec::I dt = Vec::isub(cy0, vylo);
        const Vec::I db = Vec::isub(cy1, vylo);
        const Vec::I two = Vec::iadd(one, one);
        const Vec::M t1 = Vec::eq(dt, one), t2 = Vec::eq(dt, two);
        const Vec::M b1 = Vec::eq(db, one), b2 = Vec::eq(db, two);
        const int64_t r0 = ylo * sh + base;
        const int64_t r1 = std::min<int64_t>(ylo + 1, g.src_h - 1) * sh + base;
        const int64_t r2 = std::min<int64_t>(ylo + 2, g.src_h - 1) * sh + base;
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + c * src_c;
          const Vec::F p00 = pick(plane, r0, i0), p01 = pick(plane, r0, i1);
          const Vec::F p10 = pick(plane, r1, i0), p11 = pick(plane, r1, i1);
          const Vec::F p20 = pick(plane, r2, i0), p21 = pick(plane, r2, i1);
          Vec::F v00 = Vec::select(t2, Vec::select(t1, p00, p10), p20);
          Vec::F v01 = Vec::select(t2, Vec::select(t1, p01, p11), p21);
          Vec::F v10 = Vec::select(b2, Vec::select(b1, p00, p10), p20);
          Vec::F v11 = Vec::select(b2, Vec::select(b1, p01, p11), p21);
          if constexpr (!kBorder) {
            v00 = Vec::zero_unless(k00, v00);
            v01 = Vec::zero_unless(k01, v01);
            v10 = Vec::zero_unless(k10, v10);
            v11 = Vec::zero_unless(k11, v11);
          }
          Vec::store(out + c * out_c, keep, blend_taps(t, v00, v01, v10, v11));
        }
        continue;
      }
    }
    const Vec::I sw = Vec::iset(g.stride_w);
    const Vec::I shv = Vec::iset(g.stride_h);
    const Vec::I r0 = Vec::imul(cy0, shv);
    const Vec::I r1 = Vec::imul(cy1, shv);
    const Vec::I c0 = Vec::imul(cx0, sw);
    const Vec::I c1 = Vec::imul(cx1, sw);
    const Vec::I o00 = Vec::iadd(r0, c0);
    const Vec::I o01 = Vec::iadd(r0, c1);
    const Vec::I o10 = Vec::iadd(r1, c0);
    const Vec::I o11 = Vec::iadd(r1, c1);
    for (int64_t c = 0; c < channels; ++c) {
      const scalar_t* plane = src + c * src_c;
      const Vec::F v = blend_taps(t,
                                  Vec::gather(plane, k00, o00),
                                  Vec::gather(plane, k01, o01),
                                  Vec::gather(plane, k10, o10),
                                  Vec::gather(plane, k11, o11));
      Vec::store(out + c * out_c, keep, v);
    }
  }
}

// Nearest sampling for a Vec with kCopyLanes (the portable one, whose picks
// and uint8 conversions are per-lane code anyway): no windows, the first n (up
// to kLanes) pixels of a group are copied one by one in the image's type,
// lane k from plane[off[k]] where valid[k], 0 elsewhere: the values the
// other paths give through float. The offsets are those of clamped taps,
// inside the plane, so each lane reads unconditionally, then masks. Templates
// over V so that the lane accesses are only compiled for such a Vec.
template <typename V>
struct LaneCopy {
  int64_t n;
  bool all_valid;
  int64_t off[V::kLanes];
  bool valid[V::kLanes];
};

template <typename V>
C10_ALWAYS_INLINE LaneCopy<V> lane_copy(int64_t n,
                                        typename V::I off,
                                        typename V::M valid) {
  LaneCopy<V> lc;
  lc.n = std::min<int64_t>(n, V::kLanes);
  lc.all_valid = V::all(valid);
  for (int k = 0; k < V::kLanes; ++k) {
    lc.off[k] = off[k];
    lc.valid[k] = valid[k] != 0;
  }
  return lc;
}

template <typename V, typename scalar_t>
C10_ALWAYS_INLINE void copy_lanes(const LaneCopy<V>& lc,
                                  scalar_t* out,
                                  const scalar_t* plane) {
  if (lc.n == V::kLanes && lc.all_valid) {
    for (int k = 0; k < V::kLanes; ++k) {
      out[k] = plane[lc.off[k]];
    }
  } else if (lc.n == V::kLanes) {
    for (int k = 0; k < V::kLanes; ++k) {
      const scalar_t v = plane[lc.off[k]];
      out[k] = lc.valid[k] ? v : scalar_t(0);
    }
  } else {
    for (int64_t k = 0; k < lc.n; ++k) {
      const scalar_t v = plane[lc.off[k]];
      out[k] = lc.valid[k] ? v : scalar_t(0);
    }
  }
}

// Nearest sampling of one row of every channel, as nearest_taps_loop +
// nearest_gather_loop.
template <typename scalar_t, bool kBorder>
void nearest_row(const RowJob<scalar_t>& job) {
  // Copies, as in bilinear_row.
  const Geometry g = job.g;
  const scalar_t* const src = job.src;
  scalar_t* const out_row = job.out;
  const int64_t channels = job.channels;
  const int64_t src_c = job.src_stride_c;
  const int64_t out_c = job.out_stride_c;
  const RowCoeffs k = row_coeffs(g);
  const bool loads = !Vec::kCopyLanes && g.stride_w == 1 &&
                     g.src_w >= Vec::kWindow && g.src_h >= 2;
  const int64_t sh = g.stride_h;
  const Vec::I size_x = Vec::iset(static_cast<int>(g.src_w));
  const Vec::I size_y = Vec::iset(static_cast<int>(g.src_h));
  const Vec::I one = Vec::iset(1);
  Vec::I next_x, next_y;
  nearest_taps(k, 0, next_x, next_y);
  for (int64_t x0 = 0; x0 < g.n; x0 += Vec::kLanes) {
    const Vec::I ix = next_x, iy = next_y;
    // The next group's taps first, as in bilinear_row.
    if (x0 + Vec::kLanes < g.n) {
      nearest_taps(k, x0 + Vec::kLanes, next_x, next_y);
    }
    const Vec::Tail keep = Vec::tail(g.n - x0);
    scalar_t* out = out_row + x0;
    Window win;
    if (loads && find_window<0>(g, ix, iy, win)) {
      const int64_t r0 = win.row * sh + win.base;
      if (!Vec::any(win.lower) && Vec::narrow(win.index)) {
        // Every tap on one row, in the window's first kLanes columns: one
        // load and one permute (as bilinear_window's fast path).
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + c * src_c;
          prefetch_ahead(plane, r0 + kPrefetchRows * sh + 16);
          Vec::store(out + c * out_c,
                     keep,
                     Vec::pick1(Vec::load(plane + r0), win.index));
        }
        continue;
      }
      const int64_t r1 = r0 + (Vec::any(win.lower) ? sh : 0);
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = src + c * src_c;
        prefetch_ahead(plane, r0 + kPrefetchRows * sh + 16);
        const Vec::F p0 = pick(plane, r0, win.index);
        const Vec::F p1 = pick(plane, r1, win.index);
        Vec::store(out + c * out_c, keep, Vec::select(win.lower, p0, p1));
      }
      continue;
    }
    // As in bilinear_row: the clamped tap, zeroed outside the image with zeros
    // padding.
    Vec::M valid = Vec::every();
    if constexpr (!kBorder) {
      valid = Vec::mand(Vec::inside(ix, size_x), Vec::inside(iy, size_y));
    }
    const Vec::I cx = Vec::clamp(ix, Vec::isub(size_x, one));
    const Vec::I cy = Vec::clamp(iy, Vec::isub(size_y, one));
    if (loads) {
      const int xlo = Vec::hmin(cx);
      const int ylo = Vec::hmin(cy);
      if (Vec::hmax(cx) - xlo <= Vec::kWindow - 1 && Vec::hmax(cy) - ylo <= 1) {
        const int64_t base = std::min<int64_t>(xlo, g.src_w - Vec::kWindow);
        const Vec::Index index =
            Vec::index(Vec::isub(cx, Vec::iset(static_cast<int>(base))));
        const Vec::M lower = Vec::eq(Vec::isub(cy, Vec::iset(ylo)), one);
        const int64_t r0 = ylo * sh + base;
        const int64_t r1 = std::min<int64_t>(ylo + 1, g.src_h - 1) * sh + base;
        for (int64_t c = 0; c < channels; ++c) {
          const scalar_t* plane = src + c * src_c;
          const Vec::F p0 = pick(plane, r0, index);
          const Vec::F p1 = pick(plane, r1, index);
          Vec::store(out + c * out_c,
                     keep,
                     Vec::zero_unless(valid, Vec::select(lower, p0, p1)));
        }
        continue;
      }
    }
    const Vec::I off = Vec::iadd(Vec::imul(cy, Vec::iset(g.stride_h)),
                                 Vec::imul(cx, Vec::iset(g.stride_w)));
    if constexpr (Vec::kCopyLanes) {
      const LaneCopy<Vec> lanes = lane_copy<Vec>(g.n - x0, off, valid);
      // The prefetches as in the window paths, once per cache line of
      // destination pixels.
      const bool prefetch = x0 % (64 / sizeof(scalar_t)) == 0;
      for (int64_t c = 0; c < channels; ++c) {
        const scalar_t* plane = src + c * src_c;
        if (prefetch) {
          prefetch_ahead(plane, lanes.off[0] + kPrefetchRows * sh + 16);
        }
        copy_lanes(lanes, out + c * out_c, plane);
      }
    } else {
      for (int64_t c = 0; c < channels; ++c) {
        Vec::store(
            out + c * out_c, keep, Vec::gather(src + c * src_c, valid, off));
      }
    }
  }
}

#include "cpu/sampling_tables_per_level.h"
