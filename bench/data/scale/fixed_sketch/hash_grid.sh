run(){ /usr/bin/python3.11 /work/main/bench/quality_sim.py "$@" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["acc"]*100,2), j["status"])'; }
for W in 4 16; do for rh in 0 1; do for pk in "2 0.5" "4 0.25" "8 0.125"; do set -- $pk
  echo "W=$W rehash=$rh sk_local2 ratio=20 rows=1 p2=$1 kfrac=$2 $(run --method=sk_local2 --ratio=20 --rows=1 --p2=$1 --kfrac=$2 --workers=$W --rehash=$rh)"
done; done; done
