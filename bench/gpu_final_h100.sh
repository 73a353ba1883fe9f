# One H100, after the decoding keys' last change: the keys against SDPA under CUDA graph replay, the host time per
# call before and after (alternating), make solutions for 11-13, and make bench's decoding rows (merged into
# bench/results.csv with bench/merge_run.py). Everything under /tmp/o, packed into $OUT/out.tgz.
export PYTHONUNBUFFERED=1
O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $O/gpu.txt
python3 -c "import torch,triton,numpy;print(torch.__version__, triton.__version__, numpy.__version__)" >> $O/gpu.txt
date -u +%FT%TZ >> $O/gpu.txt
timeout 150 python3 bench/decoding_graphs.py --out $O/decoding-graphs.csv > $O/decoding-graphs.txt 2>&1
echo "graphs done $(date -u +%T)" >> $O/gpu.txt
timeout 100 python3 bench/host_time.py --compare build/keys-before --out $O/host-compare.json > $O/host-compare.txt 2>&1
echo "compare done $(date -u +%T)" >> $O/gpu.txt
timeout 200 python3 -m checks.instructor.solutions --puzzle 11 --puzzle 12 --puzzle 13 --jobs 12 --out $O/solutions.md > $O/solutions.log 2>&1
echo "solutions rc=$? $(date -u +%T)" >> $O/gpu.txt
timeout 200 python3 -m checks.instructor.bench --only 11,12,13 --budget 180 --out $O/b > $O/bench.txt 2>&1
echo "bench rc=$? $(date -u +%T)" >> $O/gpu.txt
rm -f $O/b/bench/*.png; tar czf $OUT/out.tgz -C $O .
