# Four GPUs, one job each: puzzle 12's key at two and four programs per SM over its eight shapes, then the decoding
# benchmark of 12 (GPU 0); host times per call, twice (GPU 1); `make bench` for 11-13 (GPU 2); the tampering
# submissions (GPU 3). Then, alone on the machine, the wall time of checking 1 with the grader at dd6d295 and this one.
source bench/gpu_shards.sh
(export CUDA_VISIBLE_DEVICES=0
 timeout 200 python3 bench/tune_launch.py --puzzles 12 --per-sm 2,4 --blocks 64 --warps 4 --stages 2,3 --out $O/tune-12b.json > $O/tune-12b.txt 2>&1
 timeout 100 python3 bench/decoding_graphs.py --puzzles 12 --out $O/decoding-12.csv > $O/decoding-12.txt 2>&1) &
(export CUDA_VISIBLE_DEVICES=1
 for i in 1 2; do timeout 120 python3 bench/tune_launch.py --no-sweep --out $O/host-$i.json > $O/host-$i.txt 2>&1; done) &
(CUDA_VISIBLE_DEVICES=2 timeout 320 python3 -m checks.instructor.bench --only 11,12,13 --budget 290 --out $O/b > $O/bench.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=3 timeout 300 bash bench/tampering_gpu.sh > $O/tampering.txt 2>&1) &
wait
for v in .before .; do
  n=$([ "$v" = . ] && echo after || echo before)
  CUDA_VISIBLE_DEVICES=0 timeout 60 python3 bench/check_wall_times.py $v 1 > $O/wall1-$n.tsv 2>&1
done
cat $O/wall1-*.tsv $O/tampering.txt; grep -h "host:" $O/host-*.txt; tail -5 $O/bench.txt
rm -rf $O/b/bench/*.png; tar czf $OUT/out.tgz -C $O .
