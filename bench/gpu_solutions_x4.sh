# `make solutions` in four shards, one GPU each (CUDA_VISIBLE_DEVICES), on a machine of four GPUs;
# then puzzle 11's launch-shape sweep on the GPU whose shard ends first. Everything lands in $OUT/out.tgz.
export PYTHONUNBUFFERED=1
O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $O/gpu.txt
python3 -c "import torch,triton;print(torch.__version__, triton.__version__)" >> $O/gpu.txt
shard() {  # GPU, then puzzles
  g=$1; shift; args=""; for p in "$@"; do args="$args --puzzle $p"; done
  CUDA_VISIBLE_DEVICES=$g timeout 540 python3 -m checks.instructor.solutions $args --jobs 12 --out $O/solutions-$g.md > $O/solutions-$g.log 2>&1
  echo "shard $g ($*) rc=$? at $(date +%T)" >> $O/shards.txt
}
date +%T > $O/shards.txt
shard 0 1 2 3 4 5 &
shard 1 6 7 8a 8 9a &
shard 2 9 10a 10b 10 &
(shard 3 11 12 13; CUDA_VISIBLE_DEVICES=3 timeout 200 python3 bench/tune_flash_decoding.py --out $O/tune-11.json > $O/tune-11.txt 2>&1) &
wait
cat $O/shards.txt; tail -n 25 $O/solutions-*.md
tar czf $OUT/out.tgz -C $O .
