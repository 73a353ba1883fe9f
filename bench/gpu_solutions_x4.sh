# `make solutions` in four shards, one GPU each (CUDA_VISIBLE_DEVICES), on a machine of four GPUs;
# then puzzle 11's launch-shape sweep on the GPU whose shard ends first. Everything lands in $OUT/out.tgz.
source bench/gpu_shards.sh
shard 0 1 2 3 4 5 &
shard 1 6 7 8a 8 9a &
shard 2 9 10a 10b 10 &
(shard 3 11 12 13; CUDA_VISIBLE_DEVICES=3 timeout 200 python3 bench/tune_flash_decoding.py --out $O/tune-11.json > $O/tune-11.txt 2>&1) &
wait
cat $O/shards.txt; tail -n 25 $O/solutions-*.md
tar czf $OUT/out.tgz -C $O .
