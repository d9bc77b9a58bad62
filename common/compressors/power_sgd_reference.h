// A plain reference of PowerSGD for tests: double-precision, row-major
// matrices, one loop per product, no blocking. Tests hold the compressor
// (common/compressors/power_sgd.h) and both routes' updates against it.
#ifndef SKETCHFUSE_COMMON_COMPRESSORS_POWER_SGD_REFERENCE_H_
#define SKETCHFUSE_COMMON_COMPRESSORS_POWER_SGD_REFERENCE_H_

#include <cmath>
#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "common/compressors/power_sgd.h"

namespace sketchfuse::power_sgd_reference {

using Matrix = std::vector<double>;  // row-major

// (n x k) times (k x m).
inline Matrix Product(const Matrix& a, const Matrix& b, size_t n, size_t k, size_t m) {
  Matrix out(n * m, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t t = 0; t < k; ++t)
      for (size_t j = 0; j < m; ++j) out[i * m + j] += a[i * k + t] * b[t * m + j];
  return out;
}

// The transpose of an n x m matrix.
inline Matrix Transposed(const Matrix& a, size_t n, size_t m) {
  Matrix out(n * m);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) out[j * n + i] = a[i * m + j];
  return out;
}

// Modified Gram-Schmidt over the columns of a rows x rank matrix; a column
// of norm below 1e-20 becomes zero.
inline Matrix GramSchmidt(Matrix p, size_t rows, size_t rank) {
  for (size_t j = 0; j < rank; ++j) {
    for (size_t k = 0; k < j; ++k) {
      double dot = 0;
      for (size_t i = 0; i < rows; ++i) dot += p[i * rank + j] * p[i * rank + k];
      for (size_t i = 0; i < rows; ++i) p[i * rank + j] -= dot * p[i * rank + k];
    }
    double norm = 0;
    for (size_t i = 0; i < rows; ++i) norm += p[i * rank + j] * p[i * rank + j];
    norm = std::sqrt(norm);
    for (size_t i = 0; i < rows; ++i) p[i * rank + j] = norm < 1e-20 ? 0 : p[i * rank + j] / norm;
  }
  return p;
}

inline Matrix ToDouble(absl::Span<const float> v) { return Matrix(v.begin(), v.end()); }

// One step of the algorithm over W workers for one group: m[w] the vector
// worker w encodes (its residual plus its gradient), q the warm start of
// every compressed block (at LowRankLayout::Block::q_offset).
struct Step {
  Matrix update;             // the group's summed update
  std::vector<Matrix> kept;  // what each worker keeps
  Matrix next_q;             // the next warm start: the summed Q
};

inline Step ReferenceStep(const LowRankLayout& layout, const Matrix& q, const std::vector<Matrix>& m) {
  const size_t world = m.size(), rank = layout.rank;
  Step out;
  out.update.assign(layout.dim, 0.0);
  out.kept.assign(world, Matrix(layout.dim, 0.0));
  out.next_q.assign(layout.q_values, 0.0);
  for (const LowRankLayout::Block& b : layout.blocks) {
    const size_t n = b.rows * b.cols;
    if (!b.compressed) {
      for (size_t w = 0; w < world; ++w)
        for (size_t e = 0; e < n; ++e) out.update[b.offset + e] += m[w][b.offset + e];
      continue;
    }
    const Matrix qb(q.begin() + b.q_offset, q.begin() + b.q_offset + b.cols * rank);
    std::vector<Matrix> mw(world);
    Matrix p(b.rows * rank, 0.0);
    for (size_t w = 0; w < world; ++w) {
      mw[w] = Matrix(m[w].begin() + b.offset, m[w].begin() + b.offset + n);
      const Matrix pw = Product(mw[w], qb, b.rows, b.cols, rank);
      for (size_t e = 0; e < p.size(); ++e) p[e] += pw[e];
    }
    const Matrix p_hat = GramSchmidt(p, b.rows, rank);
    Matrix q_sum(b.cols * rank, 0.0);
    for (size_t w = 0; w < world; ++w) {
      const Matrix qw = Product(Transposed(mw[w], b.rows, b.cols), p_hat, b.cols, b.rows, rank);
      for (size_t e = 0; e < q_sum.size(); ++e) q_sum[e] += qw[e];
      const Matrix mine = Product(p_hat, Transposed(qw, b.cols, rank), b.rows, rank, b.cols);
      for (size_t e = 0; e < n; ++e) out.kept[w][b.offset + e] = mw[w][e] - mine[e];
    }
    const Matrix update = Product(p_hat, Transposed(q_sum, b.cols, rank), b.rows, rank, b.cols);
    for (size_t e = 0; e < n; ++e) out.update[b.offset + e] = update[e];
    for (size_t e = 0; e < q_sum.size(); ++e) out.next_q[b.q_offset + e] = q_sum[e];
  }
  return out;
}

}  // namespace sketchfuse::power_sgd_reference

#endif  // SKETCHFUSE_COMMON_COMPRESSORS_POWER_SGD_REFERENCE_H_
