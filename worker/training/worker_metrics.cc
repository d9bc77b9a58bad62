#include "worker/training/worker_metrics.h"

#include "worker/schemes/route.h"

namespace sketchfuse {
namespace {

static_assert(kPeelRecoveryWarning == 0.9, "the peel gauges' help texts name the threshold");

prometheus::Gauge& SingleGauge(prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry)
    : steps_ps_(prometheus::BuildCounter()
                    .Name("sketchfuse_worker_steps_total")
                    .Help("Training steps done, by the route that aggregated them.")
                    .Register(registry)
                    .Add({{"route", RouteName(Route::kCentralized)}})),
      steps_collective_(prometheus::BuildCounter()
                            .Name("sketchfuse_worker_steps_total")
                            .Help("Training steps done, by the route that aggregated them.")
                            .Register(registry)
                            .Add({{"route", RouteName(Route::kDecentralized)}})),
      step_seconds_(prometheus::BuildHistogram()
                        .Name("sketchfuse_worker_step_seconds")
                        .Help("Wall time of a training step.")
                        .Register(registry)
                        .Add({}, prometheus::Histogram::BucketBoundaries{1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1, 3, 10})),
      bytes_sent_(prometheus::BuildCounter()
                      .Name("sketchfuse_worker_bytes_sent_total")
                      .Help("Bytes this worker sent for gradient aggregation.")
                      .Register(registry)
                      .Add({})),
      bytes_received_(prometheus::BuildCounter()
                          .Name("sketchfuse_worker_bytes_received_total")
                          .Help("Bytes this worker received for gradient aggregation (the collectives' share, or "
                                "the shards' replies).")
                          .Register(registry)
                          .Add({})),
      dense_bytes_(prometheus::BuildCounter()
                       .Name("sketchfuse_worker_dense_bytes_total")
                       .Help("Bytes of the dense gradients the sent bytes stood for.")
                       .Register(registry)
                       .Add({})),
      compression_ratio_(SingleGauge(registry, "sketchfuse_worker_compression_ratio",
                                     "Dense gradient bytes over bytes sent, since the last progress report.")),
      residual_norm_(SingleGauge(registry, "sketchfuse_worker_residual_norm",
                                 "L2 norm of the error-feedback residuals of every group, at the last report.")),
      peel_recovery_low_(prometheus::BuildGauge()
                             .Name("sketchfuse_worker_peel_recovery_low")
                             .Help("1 while the share of the inserted energy the peel's decodes gave back "
                                   "(sketchfuse_worker_peel_recovered_share) is under 0.9, 0 otherwise; absent "
                                   "in runs without a peel.")
                             .Register(registry)),
      peel_recovered_share_(SingleGauge(registry, "sketchfuse_worker_peel_recovered_share",
                                        "Share of the energy this worker inserted into peeled sketches that the "
                                        "decodes gave back, since the run started (below 0.9: the table is too "
                                        "small for the workers' selections).")),
      train_loss_(SingleGauge(registry, "sketchfuse_worker_train_loss",
                              "Mean training loss since the last progress report.")),
      test_accuracy_(SingleGauge(registry, "sketchfuse_worker_test_accuracy",
                                 "Test accuracy at the end of the last epoch (0 to 1).")) {}

void WorkerMetrics::OnStep(const StepReport& step) {
  (step.collective ? steps_collective_ : steps_ps_).Increment();
  step_seconds_.Observe(step.seconds);
  bytes_sent_.Increment(static_cast<double>(step.bytes_sent));
  bytes_received_.Increment(static_cast<double>(step.bytes_received));
  dense_bytes_.Increment(static_cast<double>(step.dense_bytes));
}

void WorkerMetrics::OnProgress(const Progress& progress) {
  compression_ratio_.Set(progress.compression_ratio);
  residual_norm_.Set(progress.residual_norm);
  if (progress.peel_recovered_share >= 0) {
    peel_recovered_share_.Set(progress.peel_recovered_share);
    peel_recovery_low_.Add({}).Set(progress.peel_recovered_share < kPeelRecoveryWarning ? 1 : 0);
  }
  train_loss_.Set(progress.train_loss);
  if (progress.test_accuracy >= 0) test_accuracy_.Set(progress.test_accuracy);
}

}  // namespace sketchfuse
