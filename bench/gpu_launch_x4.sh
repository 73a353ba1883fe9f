# Four GPUs, one job each: `make solutions` for 11, 12 and 13 (GPU 0); the launch-shape sweeps of keys 12
# (GPU 1) and 13 (GPU 2); host times per call (GPU 3). Then, alone on the machine, the time marks of
# checking 9 and 11 without the warm grader (the second of two runs each).
export SHARD_LIMIT=420
source bench/gpu_shards.sh
shard 0 11 12 13 &
(CUDA_VISIBLE_DEVICES=1 timeout 420 python3 bench/tune_launch.py --puzzles 12 --out $O/tune-12.json > $O/tune-12.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=2 timeout 420 python3 bench/tune_launch.py --puzzles 13 --out $O/tune-13.json > $O/tune-13.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=3 timeout 300 python3 bench/tune_launch.py --no-sweep --out $O/host.json > $O/host.txt 2>&1) &
wait
for p in 9 11; do
  for i in 1 2; do
    rm -f $O/phases-$p.log
    CUDA_VISIBLE_DEVICES=0 CHECKS_WARM=0 CHECKS_PHASES=$O/phases-$p.log timeout 60 python3 -m checks $p --solution > $O/check-$p.txt 2>&1
  done
  python3 bench/phases.py $O/phases-$p.log > $O/phases-$p.txt
done
cat $O/shards.txt $O/solutions-*.md $O/host.txt; tail -3 $O/check-9.txt $O/check-11.txt
tar czf $OUT/out.tgz -C $O .
