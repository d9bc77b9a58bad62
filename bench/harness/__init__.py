"""The harness every study shares (bench/study.py, bench/scale_study.py,
scripts/local_cluster.sh): the scheme registry as the worker reports it,
runs of the worker and of local clusters, the density that meets a byte
budget, and the tidy results.csv every study writes."""
