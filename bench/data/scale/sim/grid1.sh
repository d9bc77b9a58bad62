run(){ /usr/bin/python3.11 /work/main/bench/quality_sim.py "$@" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["acc"]*100,2), j["status"])'; }
for W in 16 4; do for s in 1 2; do
 echo "W=$W s=$s dense $(run --method=dense --workers=$W --seed=$s)"
 for d in 0.02 0.04 0.08; do for nm in 0 1; do
  echo "W=$W s=$s global d=$d nomask=$nm $(run --method=global_topk --density=$d --nomask=$nm --workers=$W --seed=$s)"
 done; done
 echo "W=$W s=$s ta d=0.01 $(run --method=ta --density=0.01 --workers=$W --seed=$s)"
done; done
