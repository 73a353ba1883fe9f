# The two tampering submissions that ran into the time limit on a GPU (their code is slow at the timing size),
# graded alone, one per GPU, with their wall time.
O=/tmp/o; mkdir -p $O
for f in pre_run_hook_answer forges_the_plan; do
  (g=$([ $f = forges_the_plan ] && echo 1 || echo 0); s=$(date +%s)
   CUDA_VISIBLE_DEVICES=$g timeout 170 python3 -m checks 1 --file tests/submissions/tampering/$f.py > $O/$f.txt 2>&1
   echo "$f: rc=$? $(( $(date +%s) - s )) s" >> $O/times.txt) &
done
wait
cat $O/times.txt; grep -h -E "^(FAILED|TIMEOUT|TAMPERED|ERROR|PASSED)" $O/*.txt | cut -c1-400
tar czf $OUT/out.tgz -C $O .
