# lm, the cpu preset: validation loss against wall-clock seconds, normbench and PyTorch side by
# side; written by tools/lm-time-to-quality.sh. Rerun from this directory: gnuplot lm-time-to-quality.gp
# Data: lm-time-to-quality-normbench.tsv, lm-time-to-quality-pytorch.tsv (step, seconds, val_loss).
do for [fmt in 'png svg'] {
if (fmt eq 'png') {
    set terminal pngcairo size 900,560 font 'Sans,12'
    set output 'lm-time-to-quality.png'
} else {
    set terminal svg size 900,560 font 'Sans,12' background '#ffffff'
    set output 'lm-time-to-quality.svg'
}
set termoption noenhanced
set datafile separator tab
set key top right
set grid
set xlabel "wall-clock seconds (both at once, 1 thread(s) each)"
set ylabel "validation loss (nats per character)"
set title "lm, cpu preset (layer, seed 1, 2000 steps): time to quality"
set xrange [0:*]
set yrange [1.6:3.4]
set arrow 1 from graph 0, first 2.0 to graph 1, first 2.0 nohead dashtype 2 lc rgb "gray"
plot "lm-time-to-quality-normbench.tsv" using 2:3 skip 1 with linespoints lw 2 title "normbench", \
     "lm-time-to-quality-pytorch.tsv" using 2:3 skip 1 with linespoints lw 2 title "PyTorch 1.13.0a0 (compare/pytorch/lm_train.py)"
}
set output
