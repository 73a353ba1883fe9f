# On a machine of four GPUs, one job per GPU: puzzle 10's `make solutions` (GPU 0); puzzles 1, 11 and 13's
# (GPU 1); the decoding benchmark of keys 11-13 (GPU 2); puzzle 11's kernel forms (GPU 3). Then, alone on the
# machine, the wall time of checking puzzle 9 with the grader at dd6d295 (.before) and with this one.
export SHARD_LIMIT=330
source bench/gpu_shards.sh
shard 0 10 &
shard 1 1 11 13 &
(CUDA_VISIBLE_DEVICES=2 timeout 300 python3 bench/decoding_graphs.py --out $O/decoding-graphs.csv > $O/decoding-graphs.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=3 timeout 320 python3 bench/tune_flash_decoding.py --out $O/tune-11.json > $O/tune-11.txt 2>&1) &
wait
timeout 75 python3 bench/check_wall_times.py .before 9 > $O/wall-before.tsv 2>&1
CHECKS_PHASES=$O/phases-after.log timeout 75 python3 bench/check_wall_times.py . 9 > $O/wall-after.tsv 2>&1
cat $O/shards.txt $O/solutions-*.md $O/wall-before.tsv $O/wall-after.tsv
tar czf $OUT/out.tgz -C $O .
