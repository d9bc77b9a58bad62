#include "worker/training/optimizer_spec.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/compressor_params.h"
#include "common/error_text.h"

namespace sketchfuse {

std::string OptimizerSpec::name() const {
  switch (kind) {
    case Kind::kSgd:
      return "sgd";
    case Kind::kAdam:
      return "adam";
    case Kind::kAdamW:
      return "adamw";
  }
  return "sgd";
}

namespace {

// The shortest %g form of `value` that reads back as the same double.
std::string ShortestExact(double value) {
  for (int digits = 1; digits < 17; ++digits) {
    const std::string text = absl::StrFormat("%.*g", digits, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

}  // namespace

std::string OptimizerSpec::Canonical() const {
  if (kind == Kind::kSgd) return "";
  return absl::StrCat(name(), ":beta1=", ShortestExact(beta1), ",beta2=", ShortestExact(beta2),
                      ",eps=", ShortestExact(eps), ",weight_decay=", ShortestExact(weight_decay));
}

absl::StatusOr<OptimizerSpec> ParseOptimizerSpec(absl::string_view text) {
  OptimizerSpec spec;
  if (text.empty() || text == "sgd") return spec;
  if (text.size() > kOptimizerSpecMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: the spec ", QuoteField(text), " is longer than ",
                                                   kOptimizerSpecMaxBytes, " bytes"));
  }
  absl::StatusOr<CompressorSpec> parsed = ParseCompressorSpec(text);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("optimizer: ", parsed.status().message()));
  if (parsed->name == "sgd") {
    return absl::InvalidArgumentError(
        "optimizer: sgd takes no parameters: its momentum is --momentum, its rate --learning_rate");
  }
  if (parsed->name == "adam") {
    spec.kind = OptimizerSpec::Kind::kAdam;
  } else if (parsed->name == "adamw") {
    spec.kind = OptimizerSpec::Kind::kAdamW;
    spec.weight_decay = 0.01;  // torch.optim.AdamW's default
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer: unknown optimizer ", QuoteField(parsed->name), "; known: sgd, adam, adamw"));
  }
  ParamReader reader(*parsed);
  absl::StatusOr<double> beta1 = reader.Double("beta1", spec.beta1, 0.0, 1.0);
  if (!beta1.ok()) return absl::InvalidArgumentError(absl::StrCat("optimizer: ", beta1.status().message()));
  absl::StatusOr<double> beta2 = reader.Double("beta2", spec.beta2, 0.0, 1.0);
  if (!beta2.ok()) return absl::InvalidArgumentError(absl::StrCat("optimizer: ", beta2.status().message()));
  if (*beta1 == 1.0 || *beta2 == 1.0) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: ", parsed->name, ": beta1 and beta2 must be below 1 (",
                                                   "a moment that never forgets); got ", *beta1, " and ", *beta2));
  }
  absl::StatusOr<double> eps = reader.Double("eps", spec.eps, 0.0, 1.0);
  if (!eps.ok()) return absl::InvalidArgumentError(absl::StrCat("optimizer: ", eps.status().message()));
  absl::StatusOr<double> decay = reader.Double("weight_decay", spec.weight_decay, 0.0, 10.0);
  if (!decay.ok()) return absl::InvalidArgumentError(absl::StrCat("optimizer: ", decay.status().message()));
  if (absl::Status s = reader.Finish(); !s.ok()) return absl::InvalidArgumentError(absl::StrCat("optimizer: ", s.message()));
  if (*eps == 0) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer: ", parsed->name, ": eps must be above 0"));
  }
  spec.beta1 = *beta1;
  spec.beta2 = *beta2;
  spec.eps = *eps;
  spec.weight_decay = *decay;
  return spec;
}

OptimizerSpec OptimizerOf(const v1::RunConfig& run) {
  absl::StatusOr<OptimizerSpec> spec = ParseOptimizerSpec(run.optimizer());
  return spec.ok() ? *spec : OptimizerSpec{};
}

bool IsAdamFamily(const v1::RunConfig& run) { return OptimizerOf(run).adam_family(); }

}  // namespace sketchfuse
