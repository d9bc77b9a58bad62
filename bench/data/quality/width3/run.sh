#!/bin/bash
# usage: run.sh NAME WORKLOAD SCHEME SEED SPEC
cd /work/main
name=$1; wl=$2; scheme=$3; seed=$4; spec=$5
bash scripts/local_cluster.sh --workload=$wl --schemes=$scheme --out=/tmp/exp/$name -- --seed=$seed --compressor=$spec > /tmp/exp/$name.log 2>&1
python3 -c "
import json,sys
d=json.load(open('/tmp/exp/$name/comparison.json'))
r=(d['runs'] if isinstance(d,dict) else d)[0]
print('$name', r.get('final_test_accuracy'), round(r.get('compression_ratio') or 0,1), r.get('diverged_step'))
"
