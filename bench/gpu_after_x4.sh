# Four GPUs: `make solutions` for every puzzle in three shards, one GPU each, beside the decoding benchmark of keys
# 11-13 (GPU 3); then, alone on the machine, the wall time of checking 1, 9 and 11 with the grader at dd6d295
# (.before) and with this one, and the time marks of 9 and 11 without the warm grader.
export SHARD_LIMIT=360
source bench/gpu_shards.sh
shard 0 10 13 1 2 &
shard 1 3 4 5 6 7 8a 8 12 &
shard 2 9a 9 10a 10b 11 &
(CUDA_VISIBLE_DEVICES=3 timeout 360 python3 bench/decoding_graphs.py --out $O/decoding-graphs.csv > $O/decoding-graphs.txt 2>&1) &
wait
for v in .before .; do
  n=$([ "$v" = . ] && echo after || echo before)
  CUDA_VISIBLE_DEVICES=0 timeout 100 python3 bench/check_wall_times.py $v 1 9 11 > $O/wall-$n.tsv 2>&1
done
for p in 9 11; do
  for i in 1 2; do
    rm -f $O/phases-$p.log
    CUDA_VISIBLE_DEVICES=0 CHECKS_WARM=0 CHECKS_PHASES=$O/phases-$p.log timeout 60 python3 -m checks $p --solution > $O/check-$p.txt 2>&1
  done
  python3 bench/phases.py $O/phases-$p.log > $O/phases-$p.txt
done
cat $O/shards.txt $O/wall-*.tsv; tail -n 22 $O/solutions-*.md; grep -h "^puzzle\|NOT OK\|problem" $O/solutions-*.log | head
tar czf $OUT/out.tgz -C $O .
