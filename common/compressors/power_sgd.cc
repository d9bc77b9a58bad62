#include "common/compressors/power_sgd.h"

#include <cmath>
#include <memory>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/compressor.h"
#include "common/compressors/builtin.h"
#include "common/error_text.h"

namespace sketchfuse {

namespace {

constexpr uint64_t kMaxBlocks = uint64_t{1} << 20;
constexpr uint64_t kMaxDimension = uint64_t{1} << 32;

bool ParseDimension(absl::string_view text, uint64_t* value) {
  return absl::SimpleAtoi(text, value) && *value > 0 && *value < kMaxDimension;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> ParseBlockShapes(absl::string_view text) {
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  for (absl::string_view item : absl::StrSplit(text, '.')) {
    if (blocks.size() >= kMaxBlocks) {
      return absl::InvalidArgumentError(absl::StrCat("shapes: more than ", kMaxBlocks, " blocks"));
    }
    const size_t x = item.find('x');
    uint64_t rows = 1, cols = 0;
    const bool ok = x == absl::string_view::npos
                        ? ParseDimension(item, &cols)
                        : ParseDimension(item.substr(0, x), &rows) && ParseDimension(item.substr(x + 1), &cols);
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("shapes: block ", blocks.size(), " ", QuoteField(item),
                                                     " is not RxC or N with dimensions in [1, 2^32)"));
    }
    blocks.emplace_back(rows, cols);
  }
  return blocks;
}

std::string BlockShapesText(const std::vector<std::pair<uint64_t, uint64_t>>& blocks) {
  return absl::StrJoin(blocks, ".", [](std::string* out, const std::pair<uint64_t, uint64_t>& b) {
    absl::StrAppend(out, b.first > 1 ? absl::StrCat(b.first, "x", b.second) : absl::StrCat(b.second));
  });
}

absl::StatusOr<LowRankLayout> MakeLowRankLayout(const std::vector<std::pair<uint64_t, uint64_t>>& blocks,
                                                uint64_t rank, uint64_t dim) {
  LowRankLayout layout;
  layout.rank = rank;
  layout.dim = dim;
  if (blocks.empty()) {
    if (dim == 0) return absl::InvalidArgumentError("powersgd: a group of 0 elements");
    layout.blocks.push_back({0, 1, dim, false, 0, 0});
    layout.p_values = dim;
    return layout;
  }
  uint64_t offset = 0;
  for (const auto& [rows, cols] : blocks) {
    LowRankLayout::Block b;
    b.offset = offset;
    b.rows = rows;
    b.cols = cols;
    const uint64_t elements = rows * cols;
    b.compressed = rows > 1 && cols > 1 && (rows + cols) * rank < elements;
    b.p_offset = layout.p_values;
    b.q_offset = layout.q_values;
    layout.p_values += b.compressed ? rows * rank : elements;
    if (b.compressed) layout.q_values += cols * rank;
    offset += elements;
    if (offset > dim) break;
    layout.blocks.push_back(b);
  }
  if (offset != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("powersgd: the shapes' blocks hold ", offset, " elements, not the group's ", dim));
  }
  return layout;
}

void MultiplyByFactor(absl::Span<const float> m, absl::Span<const float> q, uint64_t rows, uint64_t cols,
                      uint64_t rank, absl::Span<float> p) {
  std::vector<double> row(rank);
  for (uint64_t i = 0; i < rows; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    const float* mi = m.data() + i * cols;
    for (uint64_t k = 0; k < cols; ++k) {
      const double v = mi[k];
      const float* qk = q.data() + k * rank;
      for (uint64_t j = 0; j < rank; ++j) row[j] += v * qk[j];
    }
    for (uint64_t j = 0; j < rank; ++j) p[i * rank + j] = static_cast<float>(row[j]);
  }
}

void MultiplyTransposedByFactor(absl::Span<const float> m, absl::Span<const float> p, uint64_t rows,
                                uint64_t cols, uint64_t rank, absl::Span<float> q) {
  std::vector<double> acc(cols * rank, 0.0);
  for (uint64_t i = 0; i < rows; ++i) {
    const float* mi = m.data() + i * cols;
    const float* pi = p.data() + i * rank;
    for (uint64_t k = 0; k < cols; ++k) {
      const double v = mi[k];
      double* ak = acc.data() + k * rank;
      for (uint64_t j = 0; j < rank; ++j) ak[j] += v * pi[j];
    }
  }
  for (uint64_t e = 0; e < cols * rank; ++e) q[e] = static_cast<float>(acc[e]);
}

void OrthonormalizeColumns(absl::Span<float> p, uint64_t rows, uint64_t rank) {
  std::vector<double> columns(rows * rank);  // column-major copy
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t j = 0; j < rank; ++j) columns[j * rows + i] = p[i * rank + j];
  }
  for (uint64_t j = 0; j < rank; ++j) {
    double* c = columns.data() + j * rows;
    for (uint64_t k = 0; k < j; ++k) {
      const double* o = columns.data() + k * rows;
      double dot = 0;
      for (uint64_t i = 0; i < rows; ++i) dot += c[i] * o[i];
      for (uint64_t i = 0; i < rows; ++i) c[i] -= dot * o[i];
    }
    double norm = 0;
    for (uint64_t i = 0; i < rows; ++i) norm += c[i] * c[i];
    norm = std::sqrt(norm);
    const double scale = norm < 1e-20 ? 0.0 : 1.0 / norm;
    for (uint64_t i = 0; i < rows; ++i) c[i] *= scale;
  }
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t j = 0; j < rank; ++j) p[i * rank + j] = static_cast<float>(columns[j * rows + i]);
  }
}

void MultiplyFactors(absl::Span<const float> p, absl::Span<const float> q, uint64_t rows, uint64_t cols,
                     uint64_t rank, absl::Span<float> out) {
  for (uint64_t i = 0; i < rows; ++i) {
    const float* pi = p.data() + i * rank;
    for (uint64_t k = 0; k < cols; ++k) {
      const float* qk = q.data() + k * rank;
      double v = 0;
      for (uint64_t j = 0; j < rank; ++j) v += static_cast<double>(pi[j]) * qk[j];
      out[i * cols + k] = static_cast<float>(v);
    }
  }
}

namespace {

class PowerSgdCompressor final : public Compressor, public LowRankRounds {
 public:
  PowerSgdCompressor(uint64_t rank, uint64_t seed, std::vector<std::pair<uint64_t, uint64_t>> shapes)
      : rank_(rank), seed_(seed), shapes_(std::move(shapes)) {}

  // The layout of the spec's shapes (checked by the factory); none without
  // shapes.
  void set_layout(std::optional<LowRankLayout> layout) { layout_ = std::move(layout); }

  std::string spec() const override {
    std::string s = absl::StrCat("powersgd:rank=", rank_, ",seed=", seed_);
    if (!shapes_.empty()) absl::StrAppend(&s, ",shapes=", BlockShapesText(shapes_));
    return s;
  }
  PayloadKind payload_kind() const override { return PayloadKind::kCandidateValues; }
  bool linear() const override { return true; }
  bool cut_for_shards_by_default() const override { return false; }

  std::string SpecForJob(const JobContext& job) const override {
    PowerSgdCompressor filled(rank_, job.seed, job.blocks.empty() ? shapes_ : job.blocks);
    return filled.spec();
  }

  absl::StatusOr<Payload> Encode(absl::Span<const float> grad, const EncodeContext&) override {
    if (absl::Status size = CheckGroupSize(grad.size()); !size.ok()) return size;
    absl::StatusOr<LowRankLayout> layout = LayoutFor(grad.size());
    if (!layout.ok()) return layout.status();
    const LowRankLayout& l = *layout;
    if (warm_start_.empty()) warm_start_ = InitialWarmStart(l);
    encoded_.assign(grad.begin(), grad.end());
    Payload p;
    p.kind = PayloadKind::kCandidateValues;
    p.dim = l.dim;
    p.values.resize(l.p_values);
    for (const LowRankLayout::Block& b : l.blocks) {
      const absl::Span<const float> m = grad.subspan(b.offset, b.rows * b.cols);
      if (b.compressed) {
        MultiplyByFactor(m, absl::MakeConstSpan(warm_start_).subspan(b.q_offset, b.cols * l.rank), b.rows,
                         b.cols, l.rank, absl::MakeSpan(p.values).subspan(b.p_offset, b.rows * l.rank));
      } else {
        std::copy(m.begin(), m.end(), p.values.begin() + b.p_offset);
      }
    }
    return p;
  }

  absl::Status CheckPayload(const Payload& payload) const override {
    if (payload.kind != PayloadKind::kCandidateValues) {
      return absl::InvalidArgumentError(PayloadKindMismatch(payload.kind));
    }
    absl::StatusOr<LowRankLayout> layout = LayoutFor(payload.dim);
    if (!layout.ok()) return layout.status();
    if (payload.values.size() != layout->p_values) {
      return absl::InvalidArgumentError(absl::StrCat(spec_head(), ": round 0 carries ", layout->p_values,
                                                     " values for a group of ", payload.dim, "; got ",
                                                     payload.values.size()));
    }
    return absl::OkStatus();
  }

  absl::Status CheckFactorRound(uint32_t round, const Payload& payload) const override {
    if (round != 1) return absl::InvalidArgumentError(absl::StrCat(spec_head(), " has rounds 0 and 1; got ", round));
    if (payload.kind != PayloadKind::kCandidateValues) {
      return absl::InvalidArgumentError(absl::StrCat(spec_head(), ": round 1 takes factor values, not a ",
                                                     PayloadKindName(payload.kind), " payload"));
    }
    absl::StatusOr<LowRankLayout> layout = LayoutFor(payload.dim);
    if (!layout.ok()) return layout.status();
    if (payload.values.size() != layout->q_values) {
      return absl::InvalidArgumentError(absl::StrCat(spec_head(), ": round 1 carries ", layout->q_values,
                                                     " values for a group of ", payload.dim, "; got ",
                                                     payload.values.size()));
    }
    return absl::OkStatus();
  }

  // Round 0's finish where the sum is: each P orthonormalized, the vectors
  // as summed. The answer is dense, of round 0's values.
  absl::StatusOr<Update> Decode(const Payload& aggregate) const override {
    if (absl::Status fits = CheckPayload(aggregate); !fits.ok()) return fits;
    return DecodeOwned(aggregate);
  }
  absl::StatusOr<Update> DecodeOwned(Payload aggregate) const override {
    if (absl::Status fits = CheckPayload(aggregate); !fits.ok()) return fits;
    const LowRankLayout l = *LayoutFor(aggregate.dim);
    for (const LowRankLayout::Block& b : l.blocks) {
      if (!b.compressed) continue;
      OrthonormalizeColumns(absl::MakeSpan(aggregate.values).subspan(b.p_offset, b.rows * l.rank), b.rows, l.rank);
    }
    Update update;
    update.dense = true;
    update.dim = l.p_values;
    update.values = std::move(aggregate.values);
    return update;
  }

  std::string FitWarning(uint64_t dim, uint32_t) const override {
    absl::StatusOr<LowRankLayout> layout = LayoutFor(dim);
    if (!layout.ok() || layout->q_values > 0) return "";
    return absl::StrCat(spec_head(), ": no block of the group is a matrix its rank-", rank_,
                        " factors make smaller, so it travels whole (dense)");
  }

  LowRankRounds* low_rank() override { return this; }
  bool sums_factor_rounds() const override { return true; }

  absl::StatusOr<Payload> SecondRound(const Update& first) override {
    if (encoded_.empty()) return absl::InvalidArgumentError("powersgd: a second round before any Encode");
    const LowRankLayout l = *LayoutFor(encoded_.size());
    if (!first.dense || first.values.size() != l.p_values) {
      return absl::InvalidArgumentError(absl::StrCat("powersgd: round 0's answer holds ", first.values.size(),
                                                     " values; its layout ", l.p_values));
    }
    Payload q;
    q.kind = PayloadKind::kCandidateValues;
    q.dim = l.dim;
    q.values.resize(l.q_values);
    for (const LowRankLayout::Block& b : l.blocks) {
      if (!b.compressed) continue;
      MultiplyTransposedByFactor(absl::MakeConstSpan(encoded_).subspan(b.offset, b.rows * b.cols),
                                 absl::MakeConstSpan(first.values).subspan(b.p_offset, b.rows * l.rank), b.rows,
                                 b.cols, l.rank, absl::MakeSpan(q.values).subspan(b.q_offset, b.cols * l.rank));
    }
    sent_q_ = q.values;
    return q;
  }

  absl::StatusOr<Outcome> Finish(const Update& first, const Update& second) override {
    if (encoded_.empty()) return absl::InvalidArgumentError("powersgd: a finish before any Encode");
    const LowRankLayout l = *LayoutFor(encoded_.size());
    if (!first.dense || first.values.size() != l.p_values || !second.dense || second.values.size() != l.q_values ||
        sent_q_.size() != l.q_values) {
      return absl::InvalidArgumentError(absl::StrCat("powersgd: answers of ", first.values.size(), " and ",
                                                     second.values.size(), " values for a layout of ", l.p_values,
                                                     " and ", l.q_values));
    }
    Outcome out;
    out.update.dense = true;
    out.update.dim = l.dim;
    out.update.values.assign(l.dim, 0.0f);
    out.kept.assign(l.dim, 0.0f);
    std::vector<float> mine;
    for (const LowRankLayout::Block& b : l.blocks) {
      const uint64_t n = b.rows * b.cols;
      const absl::Span<float> update = absl::MakeSpan(out.update.values).subspan(b.offset, n);
      if (!b.compressed) {
        std::copy(first.values.begin() + b.p_offset, first.values.begin() + b.p_offset + n, update.begin());
        continue;
      }
      const absl::Span<const float> p_hat = absl::MakeConstSpan(first.values).subspan(b.p_offset, b.rows * l.rank);
      MultiplyFactors(p_hat, absl::MakeConstSpan(second.values).subspan(b.q_offset, b.cols * l.rank), b.rows, b.cols,
                      l.rank, update);
      mine.resize(n);
      MultiplyFactors(p_hat, absl::MakeConstSpan(sent_q_).subspan(b.q_offset, b.cols * l.rank), b.rows, b.cols,
                      l.rank, absl::MakeSpan(mine));
      for (uint64_t e = 0; e < n; ++e) out.kept[b.offset + e] = encoded_[b.offset + e] - mine[e];
    }
    warm_start_ = second.values;  // the summed Q: the same on every worker
    encoded_.clear();
    sent_q_.clear();
    return out;
  }

  std::vector<float> SaveState() const override { return warm_start_; }
  absl::Status RestoreState(absl::Span<const float> saved) override {
    if (!saved.empty()) {
      if (shapes_.empty()) {
        return absl::InvalidArgumentError("powersgd: a saved warm start for a group without matrices");
      }
      if (saved.size() != layout_->q_values) {
        return absl::InvalidArgumentError(absl::StrCat("powersgd: a saved warm start of ", saved.size(),
                                                       " values; the group's is ", layout_->q_values));
      }
      if (const std::optional<size_t> bad = FirstNonFinite(saved); bad.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("powersgd: the saved warm start's value ", *bad,
                                                       " is not finite"));
      }
    }
    warm_start_.assign(saved.begin(), saved.end());
    return absl::OkStatus();
  }

 private:
  std::string spec_head() const { return absl::StrCat("powersgd:rank=", rank_); }

  // The layout for a group of `dim` elements: the shapes' (their dim only),
  // or, without shapes, one vector of dim. Thread-safe (a shard checks
  // pushes with it outside its decode lock).
  absl::StatusOr<LowRankLayout> LayoutFor(uint64_t dim) const {
    if (layout_.has_value()) {
      if (layout_->dim != dim) {
        return absl::InvalidArgumentError(absl::StrCat(spec_head(), ": the shapes hold ", layout_->dim,
                                                       " elements; the group ", dim));
      }
      return *layout_;
    }
    return MakeLowRankLayout({}, rank_, dim);
  }

  // The first step's Q: standard normal draws from the seed, the same on
  // every worker.
  std::vector<float> InitialWarmStart(const LowRankLayout& l) const {
    std::mt19937_64 rng(seed_ ^ 0x506f77657253474bULL);  // "PowerSGK"
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q(l.q_values);
    for (float& v : q) v = normal(rng);
    return q;
  }

  const uint64_t rank_;
  const uint64_t seed_;
  const std::vector<std::pair<uint64_t, uint64_t>> shapes_;
  std::optional<LowRankLayout> layout_;
  std::vector<float> warm_start_;  // round 1's layout; empty until the first Encode
  std::vector<float> encoded_;     // this step's M, until Finish
  std::vector<float> sent_q_;      // this step's Q_w, until Finish
};

}  // namespace

absl::StatusOr<std::unique_ptr<Compressor>> MakePowerSgdCompressor(ParamReader& params) {
  absl::StatusOr<uint64_t> rank = params.Uint("rank", kPowerSgdDefaultRank, 1, kPowerSgdMaxRank);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<uint64_t> seed = params.Uint("seed", 0, 0, UINT64_MAX);
  if (!seed.ok()) return seed.status();
  std::vector<std::pair<uint64_t, uint64_t>> shapes;
  if (params.Has("shapes")) {
    absl::StatusOr<std::string> text = params.Text("shapes");
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> parsed = ParseBlockShapes(*text);
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("powersgd: ", parsed.status().message()));
    shapes = *std::move(parsed);
  }
  if (absl::Status s = params.Finish(); !s.ok()) return s;
  std::optional<LowRankLayout> layout;
  if (!shapes.empty()) {
    uint64_t dim = 0;
    for (const auto& [rows, cols] : shapes) {
      dim += rows * cols;
      if (dim >= (uint64_t{1} << 32)) {
        return absl::InvalidArgumentError("powersgd: the shapes hold 2^32 elements or more");
      }
    }
    absl::StatusOr<LowRankLayout> made = MakeLowRankLayout(shapes, *rank, dim);
    if (!made.ok()) return made.status();
    layout = *std::move(made);
  }
  auto compressor = std::make_unique<PowerSgdCompressor>(*rank, *seed, std::move(shapes));
  compressor->set_layout(std::move(layout));
  return std::unique_ptr<Compressor>(std::move(compressor));
}

}  // namespace sketchfuse
