run(){ /usr/bin/python3.11 /work/main/bench/quality_sim.py "$@" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["acc"]*100,2), j["status"])'; }
echo "cnn W=16 sk_local2 ratio=30 rows=1 p2=2 kfrac=1 $(run --model=cnn --method=sk_local2 --ratio=30 --rows=1 --p2=2 --kfrac=1 --workers=16)"
echo "cnn W=4 sk_local2 ratio=30 rows=1 p2=2 kfrac=1 $(run --model=cnn --method=sk_local2 --ratio=30 --rows=1 --p2=2 --kfrac=1 --workers=4)"
