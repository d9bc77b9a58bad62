#include "worker/schemes/scheme_factory.h"

#include "absl/strings/str_cat.h"
#include "worker/schemes/collective_scheme.h"
#include "worker/schemes/ps_scheme.h"
#include "worker/schemes/scheme_registry.h"

namespace sketchfuse {

bool NeedsCollective(const std::string& scheme) {
  absl::StatusOr<SchemeInfo> info = FindScheme(scheme);
  return info.ok() && info->route != Route::kCentralized;
}

absl::StatusOr<BuiltScheme> MakeScheme(const v1::JoinReply& joined, SchemeEnvironment environment) {
  const v1::RunConfig& run = joined.job().run();
  absl::StatusOr<SchemeInfo> info = FindScheme(run.scheme());
  if (!info.ok()) return info.status();
  if (absl::Status s = CheckRunScheme(run); !s.ok()) return s;
  if (info->route != Route::kCentralized && environment.collective == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheme ", run.scheme(), " runs on the ", RouteName(info->route), " route: it needs a collective"));
  }
  const TransportFactory make_transport =
      environment.transport ? environment.transport : GrpcTransports(environment.rpc, environment.retry);
  BuiltScheme built;
  switch (info->route) {
    case Route::kCentralized: {
      absl::StatusOr<std::unique_ptr<PsScheme>> ps =
          PsScheme::Create(joined, make_transport);
      if (!ps.ok()) return ps.status();
      built.transport = &(*ps)->transport();
      built.scheme = *std::move(ps);
      break;
    }
    case Route::kDecentralized: {
      absl::StatusOr<std::unique_ptr<CollectiveScheme>> collective =
          CollectiveScheme::Create(joined.job(), environment.collective);
      if (!collective.ok()) return collective.status();
      built.scheme = *std::move(collective);
      break;
    }
    case Route::kHybrid: {
      absl::StatusOr<std::unique_ptr<HybridScheme>> hybrid =
          HybridScheme::Create(joined, make_transport, environment.collective, std::move(environment.hybrid));
      if (!hybrid.ok()) return hybrid.status();
      built.scheme = *std::move(hybrid);
      break;
    }
  }
  return built;
}

}  // namespace sketchfuse
