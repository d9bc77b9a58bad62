# cap rule: linear (flag 1) vs sqrt (flag 1/sqrt(W/4)) at W=8,16; MLP and CNN; seeds 1..3
for s in 1 2 3; do for W in 8 16; do for m in mlp cnn; do
  ./rc.sh cs_${m}_w${W}_s${s}_dense $m dense_allreduce $s $W
  ./rc.sh cs_${m}_w${W}_s${s}_lin $m sketch_ps $s $W
  sq=$(python3 -c "print(round(1/($W/4)**0.5,4))")
  ./rc.sh cs_${m}_w${W}_s${s}_sqrt $m sketch_ps $s $W --release_cap=$sq
done; done; done
