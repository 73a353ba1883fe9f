set -x
export PYTHONUNBUFFERED=1 CHECKS_WARM=0 CHECKS_PROGRESS_FILE=/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
python3 -c "import torch,triton;print(torch.__version__, triton.__version__)" >> $OUT/gpu.txt
for n in 1 9 11; do for r in 1 2; do
  s=$(date +%s%N); CHECKS_PHASES=$OUT/phases-$n-$r.log timeout 100 python3 -m checks $n --solution > $OUT/check-$n-$r.txt 2>&1; e=$(date +%s%N)
  echo "$n $r $(( (e - s) / 1000000 )) ms" >> $OUT/wall.txt
done; done
timeout 200 python3 bench/decoding_graphs.py --out $OUT/decoding-graphs.csv > $OUT/decoding-graphs.txt 2>&1
timeout 170 python3 bench/tune_decoding.py --puzzles 11 --json $OUT/tune-11.json > $OUT/tune-11.txt 2>&1
echo done
