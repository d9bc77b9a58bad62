// What an evaluation of a model on held-out data measures.
#ifndef SKETCHFUSE_WORKER_TRAINING_EVALUATION_H_
#define SKETCHFUSE_WORKER_TRAINING_EVALUATION_H_

namespace sketchfuse {

struct Evaluation {
  double loss;      // Mean cross-entropy over the examples.
  double accuracy;  // Fraction of examples whose arg-max logit is the label, in [0, 1].
};

}  // namespace sketchfuse

#endif  // SKETCHFUSE_WORKER_TRAINING_EVALUATION_H_
