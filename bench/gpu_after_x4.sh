# Four GPUs: `make solutions` for every puzzle in four shards, one GPU each, the decoding benchmark of keys 11-13
# after the last shard (GPU 3); then, alone on the machine, the wall time of checking 9 and 11 with the grader at
# dd6d295 (.before) and with this one, and the time marks of one check of each without the warm grader.
export SHARD_LIMIT=320
source bench/gpu_shards.sh
shard 0 10 1 2 &
shard 1 3 4 5 6 7 8a 8 &
shard 2 9a 9 10a 10b &
(shard 3 11 12 13; CUDA_VISIBLE_DEVICES=3 timeout 170 python3 bench/decoding_graphs.py --out $O/decoding-graphs.csv > $O/decoding-graphs.txt 2>&1) &
wait
for v in .before .; do
  n=$([ "$v" = . ] && echo after || echo before)
  CUDA_VISIBLE_DEVICES=0 timeout 100 python3 bench/check_wall_times.py $v 9 11 > $O/wall-$n.tsv 2>&1
done
for p in 9 11; do
  CUDA_VISIBLE_DEVICES=0 CHECKS_WARM=0 CHECKS_PHASES=$O/phases-$p.log timeout 40 python3 -m checks $p --solution > $O/check-$p.txt 2>&1
  python3 bench/phases.py $O/phases-$p.log > $O/phases-$p.txt
done
cat $O/shards.txt $O/wall-*.tsv; tail -n 22 $O/solutions-*.md | grep -v "^$"; grep -h "^  puzzle" $O/solutions-*.log | head
tar czf $OUT/out.tgz -C $O .
