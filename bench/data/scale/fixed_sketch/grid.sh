run(){ /usr/bin/python3.11 /work/main/bench/quality_sim.py "$@" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["acc"]*100,2), j["status"])'; }
for W in 16; do for s in 1; do
 for rows in 1 3; do for pk in "2 0.5" "4 0.25"; do set -- $pk
  echo "W=$W s=$s sk_local2 ratio=20 rows=$rows p2=$1 kfrac=$2 $(run --method=sk_local2 --ratio=20 --rows=$rows --p2=$1 --kfrac=$2 --workers=$W --seed=$s)"
 done; done
done; done
