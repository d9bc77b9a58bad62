run(){ /usr/bin/python3.11 /work/main/bench/quality_sim.py "$@" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["acc"]*100,2), j["status"])'; }
for W in 16 4; do s=1
 for cfg in "15 2 0.25" "25 2 0.75" "30 2 1" "25 3 0.5" "20 1.5 0.67" "40 2 1.5"; do set -- $cfg
  echo "W=$W s=$s sk_local2 ratio=$1 rows=1 p2=$2 kfrac=$3 $(run --method=sk_local2 --ratio=$1 --rows=1 --p2=$2 --kfrac=$3 --workers=$W --seed=$s)"
 done
done
