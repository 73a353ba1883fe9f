# Four GPUs, one job each: `make solutions` for 1, 12 and 13 (GPU 0); `make bench` for 11-13, now as CUDA graph
# replays with the Python call beside them (GPU 1); the tampering submissions (GPU 2); the decoding benchmark of
# keys 12 and 13 (GPU 3).
export SHARD_LIMIT=300
source bench/gpu_shards.sh
shard 0 1 12 13 &
(CUDA_VISIBLE_DEVICES=1 timeout 300 python3 -m checks.instructor.bench --only 11,12,13 --budget 270 --out $O/b > $O/bench.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=2 timeout 300 bash bench/tampering_gpu.sh > $O/tampering.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=3 timeout 300 python3 bench/decoding_graphs.py --puzzles 12,13 --out $O/decoding-graphs.csv > $O/decoding-graphs.txt 2>&1) &
wait
cat $O/shards.txt $O/tampering.txt $O/decoding-graphs.txt; tail -n 8 $O/solutions-0.md; grep -h "^  puzzle" $O/solutions-0.log; tail -4 $O/bench.txt
rm -f $O/b/bench/*.png; tar czf $OUT/out.tgz -C $O .
