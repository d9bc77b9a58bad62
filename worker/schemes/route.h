// The routes a gradient group can take, in one vocabulary for the registry,
// the exchanges' results, the timeline and the metrics.
#ifndef SKETCHFUSE_WORKER_SCHEMES_ROUTE_H_
#define SKETCHFUSE_WORKER_SCHEMES_ROUTE_H_

namespace sketchfuse {

enum class Route {
  kCentralized,    // through the aggregation servers (worker/schemes/ps_scheme.h)
  kDecentralized,  // through the workers' collectives (worker/schemes/collective_scheme.h)
  kHybrid,         // a scheme's: centralized while the servers answer (worker/schemes/hybrid_scheme.h)
};

// "centralized", "decentralized" or "hybrid".
inline const char* RouteName(Route route) {
  switch (route) {
    case Route::kCentralized:
      return "centralized";
    case Route::kDecentralized:
      return "decentralized";
    case Route::kHybrid:
      return "hybrid";
  }
  return "";
}

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_SCHEMES_ROUTE_H_
