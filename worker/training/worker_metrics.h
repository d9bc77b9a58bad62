// A worker's Prometheus metrics (served on --metrics_port):
//   sketchfuse_worker_steps_total{route}         steps done, by the route that aggregated them
//   sketchfuse_worker_step_seconds               wall time per step (histogram)
//   sketchfuse_worker_bytes_sent_total           bytes this worker sent for gradients
//   sketchfuse_worker_bytes_received_total       bytes it received for them
//   sketchfuse_worker_dense_bytes_total          bytes of the dense gradients they stood for
//   sketchfuse_worker_compression_ratio          dense bytes / bytes sent, since the last report
//   sketchfuse_worker_residual_norm              L2 norm of the error-feedback residuals
//   sketchfuse_worker_peel_recovered_share       share of the energy inserted into peeled sketches
//                                                that the decodes gave back, since the start (runs
//                                                with count_sketch method=peel, either placement)
//   sketchfuse_worker_peel_recovery_low          1 while that share is under kPeelRecoveryWarning
//                                                (0.9: the table is too small for the workers'
//                                                selections, the summary warns too), 0 while it is
//                                                not; absent until a peel has decoded
//   sketchfuse_worker_train_loss                 mean training loss since the last report
//   sketchfuse_worker_test_accuracy              at the last epoch's end
// NOTE: thread-safe (prometheus-cpp's metrics are).
#ifndef SKETCHFUSE_WORKER_TRAINING_WORKER_METRICS_H_
#define SKETCHFUSE_WORKER_TRAINING_WORKER_METRICS_H_

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "worker/pipeline/step_stats.h"

namespace sketchfuse {

class WorkerMetrics {
 public:
  // Registers the metrics; `registry` must outlive this object.
  explicit WorkerMetrics(prometheus::Registry& registry);

  void OnStep(const StepReport& step);
  void OnProgress(const Progress& progress);

 private:
  prometheus::Counter& steps_ps_;
  prometheus::Counter& steps_collective_;
  prometheus::Histogram& step_seconds_;
  prometheus::Counter& bytes_sent_;
  prometheus::Counter& bytes_received_;
  prometheus::Counter& dense_bytes_;
  prometheus::Gauge& compression_ratio_;
  prometheus::Gauge& residual_norm_;
  // Its one gauge is added at the first report with a peel's share
  // (Family::Add is idempotent and thread-safe).
  prometheus::Family<prometheus::Gauge>& peel_recovery_low_;
  prometheus::Gauge& peel_recovered_share_;
  prometheus::Gauge& train_loss_;
  prometheus::Gauge& test_accuracy_;
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_WORKER_METRICS_H_
