# Sourced by the GPU run scripts: the machine's line, and `shard GPU PUZZLE...` (`make solutions` for those
# puzzles on that GPU alone, its table and log under $O). SHARD_LIMIT: seconds a shard may take.
export PYTHONUNBUFFERED=1
O=/tmp/o; mkdir -p $O
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $O/gpu.txt
python3 -c "import torch,triton;print(torch.__version__, triton.__version__)" >> $O/gpu.txt
shard() {  # GPU, then puzzles
  g=$1; shift; args=""; for p in "$@"; do args="$args --puzzle $p"; done
  CUDA_VISIBLE_DEVICES=$g timeout "${SHARD_LIMIT:-540}" python3 -m checks.instructor.solutions $args --jobs 12 \
    --out $O/solutions-$g.md > $O/solutions-$g.log 2>&1
  echo "shard $g ($*) rc=$? at $(date +%T)" >> $O/shards.txt
}
date +%T > $O/shards.txt
