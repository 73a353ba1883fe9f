# Keys 12 and 13 at B = 16 (128 heads), where make bench found 12 slower: two or four programs per SM, two or
# three stages (12, GPU 0); 13's two launch shapes (GPU 1).
O=/tmp/o; mkdir -p $O
(CUDA_VISIBLE_DEVICES=0 timeout 150 python3 bench/tune_launch.py --puzzles 12 --batches 16 --lengths 16384,65536,131072 --per-sm 2,4,8 --blocks 64 --warps 4 --stages 2,3 --out $O/tune-12-b16.json > $O/tune-12-b16.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=1 timeout 150 python3 bench/tune_launch.py --puzzles 13 --batches 16 --lengths 16384,131072 --per-sm 2,4,8 --blocks 64,128 --warps 4 --stages 2 --out $O/tune-13-b16.json > $O/tune-13-b16.txt 2>&1) &
wait
grep -v "host:" $O/tune-12-b16.txt $O/tune-13-b16.txt | head -80
tar czf $OUT/out.tgz -C $O .
