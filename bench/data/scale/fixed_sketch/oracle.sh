run(){ /usr/bin/python3.11 /work/main/bench/quality_sim.py "$@" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["acc"]*100,2), j["status"])'; }
for d in 0.0333 0.1; do echo "W=16 global_topk density=$d $(run --method=global_topk --density=$d --workers=16)"; done
echo "W=16 dense $(run --method=dense --workers=16)"
