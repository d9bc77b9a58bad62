# The real runs behind docs/BENCHMARKS.md, "a sketch whose bytes do not grow" (the 2-core VM,
# 2026-11-26), with rc.sh beside this folder. fs4/fs8/fs16 (in the folder, not below) ran the first
# version: density=0.025,width=2,candidates=2 hashed per step. fsps4 and fsj4/8/16 ran that shape with
# hash=job (then the default); from g4/g8 and the seeds on, the default is
# density=0.0333,rows=1,width=1,candidates=2 (hash=job). Output: real_grid.txt (name, accuracy, ratio).
bash bench/data/scale/rc.sh fsps4 mlp fixed_sketch_ps 1 4
bash bench/data/scale/rc.sh fsj16 mlp fixed_sketch_allreduce 1 16
bash bench/data/scale/rc.sh fsj8 mlp fixed_sketch_allreduce 1 8
bash bench/data/scale/rc.sh fsj4 mlp fixed_sketch_allreduce 1 4
g(){ n=$1; shift; bash bench/data/scale/rc.sh "$n" mlp fixed_sketch_allreduce 1 16 --compressor="count_sketch:method=candidates,rows=1,$1"; }
g g16_d020_w3_p2 "density=0.02,width=3,candidates=2"
g g16_d033_w1_p2 "density=0.0333,width=1,candidates=2"
g g16_d025_w3_p1 "density=0.025,width=3,candidates=1"
g g16_d0167_w4_p2 "density=0.0167,width=4,candidates=2"
g g16_d0125_w4_p4 "density=0.0125,width=4,candidates=4"
g g16_d025_w2_p2_step "density=0.025,width=2,candidates=2,hash=step"
g(){ n=$1; W=$2; shift 2; bash bench/data/scale/rc.sh "$n" mlp fixed_sketch_allreduce 1 $W --compressor="count_sketch:method=candidates,rows=1,$1"; }
g g16_d050_w1_p1 16 "density=0.05,width=1,candidates=1"
g g16_d040_w05_p2 16 "density=0.04,width=0.5,candidates=2"
g g8_d033_w1_p2 8 "density=0.0333,width=1,candidates=2"
g g4_d033_w1_p2 4 "density=0.0333,width=1,candidates=2"
for s in 5 2 3; do bash bench/data/scale/rc.sh fsd4_s$s mlp fixed_sketch_allreduce $s 4; done
bash bench/data/scale/rc.sh dense4_s5 mlp dense_allreduce 5 4
for s in 2 3; do bash bench/data/scale/rc.sh fsd16_s$s mlp fixed_sketch_allreduce $s 16; bash bench/data/scale/rc.sh fsd8_s$s mlp fixed_sketch_allreduce $s 8; done
bash bench/data/scale/rc.sh fsps16 mlp fixed_sketch_ps 1 16
# The CNN at the default (fscnn4 was run again after a first attempt whose launcher script was
# edited while it ran).
for W in 4 8 16; do bash bench/data/scale/rc.sh fscnn$W cnn fixed_sketch_allreduce 1 $W; done
# gtopk on the CNN at 16 workers (also uncapped, also the top k of exact sums)
bash bench/data/scale/rc.sh gtopkcnn16 cnn gtopk 1 16
