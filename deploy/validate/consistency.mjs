#!/usr/bin/env node
// SketchFuse-specific checks of a rendered deployment (multi-document YAML, a file or stdin),
// for what the schema cannot see:
//   - WORLD_SIZE equals the worker Job's completions and parallelism, NUM_SHARDS the server
//     StatefulSet's replicas;
//   - the servers' job-config init container and the workers pass every run flag, each from
//     the same ConfigMap variable (a worker whose run differs from the job's is refused);
//   - every upper-case variable a container script reads is a ConfigMap key (or one that
//     Kubernetes sets: HOSTNAME, JOB_COMPLETION_INDEX): the scripts run under `set -u`;
//   - every `/bin/sh -c` script parses (`sh -n`).
// Exit 0 and `consistent: ...` when all hold; 1 and one line per problem otherwise.

import fs from "node:fs";
import { spawnSync } from "node:child_process";
import yaml from "js-yaml";

// The run flags: v1.RunConfig plus the job's name and size (proto/job_config.proto).
const RUN_FLAGS = ["job", "world_size", "workload", "scheme", "compressor", "fusion", "seed", "batch_size",
  "learning_rate", "momentum", "error_feedback", "epochs", "train_examples", "test_examples", "second_round"];
const FROM_KUBERNETES = new Set(["HOSTNAME", "JOB_COMPLETION_INDEX"]);

const text = fs.readFileSync(process.argv[2] && process.argv[2] !== "-" ? process.argv[2] : 0, "utf8");
const objects = yaml.loadAll(text).filter((o) => o && typeof o === "object");
const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata?.name === name);
const problems = [];

const config = find("ConfigMap", "sketchfuse-run");
const servers = find("StatefulSet", "sketchfuse-server");
const workers = find("Job", "sketchfuse-worker");
for (const [what, obj] of [["ConfigMap sketchfuse-run", config], ["StatefulSet sketchfuse-server", servers], ["Job sketchfuse-worker", workers]]) {
  if (!obj) problems.push(`${what} is missing`);
}

if (config && servers && workers) {
  const data = config.data ?? {};
  const worldSize = Number(data.WORLD_SIZE), shards = Number(data.NUM_SHARDS);
  if (workers.spec?.completions !== worldSize || workers.spec?.parallelism !== worldSize) {
    problems.push(`Job sketchfuse-worker: completions (${workers.spec?.completions}) and parallelism (${workers.spec?.parallelism}) must equal WORLD_SIZE (${data.WORLD_SIZE})`);
  }
  if (servers.spec?.replicas !== shards) {
    problems.push(`StatefulSet sketchfuse-server: replicas (${servers.spec?.replicas}) must equal NUM_SHARDS (${data.NUM_SHARDS})`);
  }

  // Every container script: [label, script].
  const scripts = [];
  for (const [owner, obj] of [["StatefulSet sketchfuse-server", servers], ["Job sketchfuse-worker", workers]]) {
    const spec = obj.spec?.template?.spec ?? {};
    for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
      const argv = [...(c.command ?? []), ...(c.args ?? [])];
      const at = argv.indexOf("-c");
      if (/(^|\/)sh$/.test(argv[0] ?? "") && at >= 0 && typeof argv[at + 1] === "string") {
        scripts.push([`${owner} container ${c.name}`, argv[at + 1]]);
      }
    }
  }

  // Run flags: --flag="$VAR" in the job-config init container and in the worker, alike.
  const flagsOf = (script) => {
    const flags = new Map();
    for (const m of script.matchAll(/--([a-z_]+)="?\$\{?([A-Z_]+)\}?"?/g)) flags.set(m[1], m[2]);
    return flags;
  };
  const initScript = scripts.find(([label]) => label.endsWith("container job-config"));
  const workerScript = scripts.find(([label]) => label.endsWith("container worker"));
  if (!initScript || !workerScript) {
    problems.push("the job-config init container or the worker container has no /bin/sh -c script");
  } else {
    const init = flagsOf(initScript[1]), worker = flagsOf(workerScript[1]);
    // The job's partitions follow the shard count (worker/pipeline/job_plan.h).
    if (init.get("num_shards") !== "NUM_SHARDS") {
      problems.push(`${initScript[0]}: must pass --num_shards="$NUM_SHARDS" (the job's partitions follow the shard count)`);
    }
    for (const flag of RUN_FLAGS) {
      if (!init.has(flag)) problems.push(`${initScript[0]}: run flag --${flag} is not passed`);
      if (!worker.has(flag)) problems.push(`${workerScript[0]}: run flag --${flag} is not passed`);
      if (init.has(flag) && worker.has(flag) && init.get(flag) !== worker.get(flag)) {
        problems.push(`run flag --${flag}: the job config takes $${init.get(flag)}, the workers $${worker.get(flag)}`);
      }
    }
  }

  // Variables and syntax.
  const hasSh = spawnSync("sh", ["-c", "exit 0"]).status === 0;
  for (const [label, script] of scripts) {
    for (const m of script.matchAll(/\$\{?([A-Z][A-Z0-9_]*)/g)) {
      if (!(m[1] in data) && !FROM_KUBERNETES.has(m[1])) problems.push(`${label}: reads $${m[1]}, which is not in ConfigMap sketchfuse-run`);
    }
    if (hasSh) {
      const r = spawnSync("sh", ["-n"], { input: script, encoding: "utf8" });
      if (r.status !== 0) problems.push(`${label}: script does not parse: ${(r.stderr || "").trim().split("\n")[0]}`);
    }
  }
}

const unique = [...new Set(problems)];
if (unique.length > 0) {
  for (const p of unique) console.error(p);
  process.exit(1);
}
console.log(`consistent: WORLD_SIZE=${config.data.WORLD_SIZE} workers, NUM_SHARDS=${config.data.NUM_SHARDS} shards, ${RUN_FLAGS.length} run flags alike`);
