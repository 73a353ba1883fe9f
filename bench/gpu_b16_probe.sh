# One H100: key 12 at B = 16 through bench/b16_probe.py (inputs drawn two ways, three timers), then make bench for
# puzzle 12 alone, to see whether its B = 16 rows are slower again. Output under /tmp/o, packed into $OUT/out.tgz.
export PYTHONUNBUFFERED=1
O=/tmp/o; mkdir -p $O
timeout 200 python3 bench/b16_probe.py > $O/b16-probe.txt 2>&1

rm -f $O/b12/bench/*.png; tar czf $OUT/out.tgz -C $O .
