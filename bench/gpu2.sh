# same-machine wall times of a check: the grader at dd6d295 (.before) and this one; phases of this one
export PYTHONUNBUFFERED=1
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/o/gpu.txt
python3 -c "import torch,triton;print(torch.__version__, triton.__version__)" >> /tmp/o/gpu.txt
timeout 250 python3 bench/check_wall_times.py .before 1 9 11 > /tmp/o/wall-before.tsv 2>&1
CHECKS_PHASES=/tmp/o/phases-after.log timeout 250 python3 bench/check_wall_times.py . 1 9 11 > /tmp/o/wall-after.tsv 2>&1
cat /tmp/o/wall-before.tsv /tmp/o/wall-after.tsv
tar czf $OUT/out.tgz -C /tmp/o .
