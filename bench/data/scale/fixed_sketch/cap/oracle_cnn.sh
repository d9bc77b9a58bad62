run(){ /usr/bin/python3.11 /work/main/bench/quality_sim.py "$@" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["acc"]*100,2), j["status"])'; }
echo "cnn W=16 global_topk density=0.0333 $(run --model=cnn --method=global_topk --density=0.0333 --workers=16)"
echo "cnn W=4 global_topk density=0.0333 $(run --model=cnn --method=global_topk --density=0.0333 --workers=4)"
echo "cnn W=16 dense $(run --model=cnn --method=dense --workers=16)"
