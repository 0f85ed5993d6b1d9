# normbench plot: the figure, and the command line that made it
nb_figure = 'lm / tinyshakespeare [cpu pre]'
nb_command = 'normbench plot --task lm --db docs/results/lm.db --out docs/results/lm-tinyshakespeare'
# Edit and rerun from this directory: gnuplot lm-tinyshakespeare.gp
# Data: lm-tinyshakespeare-data/METRIC-step|time-NORM.dat, columns: x (training step, or seconds
# since the run started), smoothed mean over the runs, that mean minus and
# plus one sample standard deviation over the runs (kept within the smallest
# and largest run's value there), the unsmoothed mean, and
# how many runs cover the point. Smoothing (training series only): debiased
# exponential moving average with weight 0.6, applied to each run's raw series
# before alignment and thinning to at most 1000 points.
if (!exists('out_png')) out_png = 'lm-tinyshakespeare.png'
if (!exists('out_svg')) out_svg = 'lm-tinyshakespeare.svg'
formats = 'png svg'
do for [fmt in formats] {
if (fmt eq 'png') {
    set terminal pngcairo size 1500,970 font 'Sans,12'
    set output out_png
} else {
    set terminal svg size 1500,970 font 'Sans,12' background '#ffffff'
    set output out_svg
}
set termoption noenhanced
set grid
set border 3
set tics nomirror
set format x '%g'
set xrange [0:*]
set autoscale xfixmax
set multiplot layout 2,2 title 'lm / tinyshakespeare [cpu pre]'."\n".'mean over seeds, band ± 1 std within the runs'."'".' range; training loss: debiased EMA 0.6 (faint: raw)'

# ---- a panel against steps
set title 'training loss against training steps'
set xlabel 'training step'
set ylabel 'training loss (cross-entropy, nats)'
unset logscale y
set key top right box opaque samplen 2 spacing 1.1
plot 'lm-tinyshakespeare-data/train_loss-step-none.dat' using 1:3:4 with filledcurves fc rgb '#7f7f7f' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-step-layer.dat' using 1:3:4 with filledcurves fc rgb '#1f77b4' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-step-rms.dat' using 1:3:4 with filledcurves fc rgb '#d62728' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-step-prms.dat' using 1:3:4 with filledcurves fc rgb '#ff7f0e' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-step-dyt.dat' using 1:3:4 with filledcurves fc rgb '#9467bd' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-step-none.dat' using 1:5 with lines lc rgb '#a07f7f7f' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-step-layer.dat' using 1:5 with lines lc rgb '#a01f77b4' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-step-rms.dat' using 1:5 with lines lc rgb '#a0d62728' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-step-prms.dat' using 1:5 with lines lc rgb '#a0ff7f0e' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-step-dyt.dat' using 1:5 with lines lc rgb '#a09467bd' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-step-none.dat' using 1:2 with lines lc rgb '#7f7f7f' lw 2.5 title 'none (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-step-layer.dat' using 1:2 with lines lc rgb '#1f77b4' lw 2.5 title 'layer (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-step-rms.dat' using 1:2 with lines lc rgb '#d62728' lw 2.5 title 'rms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-step-prms.dat' using 1:2 with lines lc rgb '#ff7f0e' lw 2.5 title 'prms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-step-dyt.dat' using 1:2 with lines lc rgb '#9467bd' lw 2.5 title 'dyt (1 run, seed 1)'

# ---- a panel against time
set title 'training loss against wall-clock time'
set xlabel 'wall-clock time since the run started (s, evaluation included)'
set ylabel 'training loss (cross-entropy, nats)'
unset logscale y
unset key
plot 'lm-tinyshakespeare-data/train_loss-time-none.dat' using 1:3:4 with filledcurves fc rgb '#7f7f7f' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-time-layer.dat' using 1:3:4 with filledcurves fc rgb '#1f77b4' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-time-rms.dat' using 1:3:4 with filledcurves fc rgb '#d62728' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-time-prms.dat' using 1:3:4 with filledcurves fc rgb '#ff7f0e' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-time-dyt.dat' using 1:3:4 with filledcurves fc rgb '#9467bd' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/train_loss-time-none.dat' using 1:5 with lines lc rgb '#a07f7f7f' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-time-layer.dat' using 1:5 with lines lc rgb '#a01f77b4' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-time-rms.dat' using 1:5 with lines lc rgb '#a0d62728' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-time-prms.dat' using 1:5 with lines lc rgb '#a0ff7f0e' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-time-dyt.dat' using 1:5 with lines lc rgb '#a09467bd' lw 1 notitle, \
     'lm-tinyshakespeare-data/train_loss-time-none.dat' using 1:2 with lines lc rgb '#7f7f7f' lw 2.5 title 'none (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-time-layer.dat' using 1:2 with lines lc rgb '#1f77b4' lw 2.5 title 'layer (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-time-rms.dat' using 1:2 with lines lc rgb '#d62728' lw 2.5 title 'rms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-time-prms.dat' using 1:2 with lines lc rgb '#ff7f0e' lw 2.5 title 'prms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/train_loss-time-dyt.dat' using 1:2 with lines lc rgb '#9467bd' lw 2.5 title 'dyt (1 run, seed 1)'

# ---- a panel against steps
set title 'val_loss against training steps'
set xlabel 'training step'
set ylabel 'val_loss'
unset logscale y
unset key
plot 'lm-tinyshakespeare-data/val_loss-step-none.dat' using 1:3:4 with filledcurves fc rgb '#7f7f7f' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-step-layer.dat' using 1:3:4 with filledcurves fc rgb '#1f77b4' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-step-rms.dat' using 1:3:4 with filledcurves fc rgb '#d62728' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-step-prms.dat' using 1:3:4 with filledcurves fc rgb '#ff7f0e' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-step-dyt.dat' using 1:3:4 with filledcurves fc rgb '#9467bd' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-step-none.dat' using 1:2 with linespoints lc rgb '#7f7f7f' lw 2.5 pt 7 ps 0.7 title 'none (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-step-layer.dat' using 1:2 with linespoints lc rgb '#1f77b4' lw 2.5 pt 7 ps 0.7 title 'layer (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-step-rms.dat' using 1:2 with linespoints lc rgb '#d62728' lw 2.5 pt 7 ps 0.7 title 'rms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-step-prms.dat' using 1:2 with linespoints lc rgb '#ff7f0e' lw 2.5 pt 7 ps 0.7 title 'prms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-step-dyt.dat' using 1:2 with linespoints lc rgb '#9467bd' lw 2.5 pt 7 ps 0.7 title 'dyt (1 run, seed 1)'

# ---- a panel against time
set title 'val_loss against wall-clock time'
set xlabel 'wall-clock time since the run started (s, evaluation included)'
set ylabel 'val_loss'
unset logscale y
unset key
plot 'lm-tinyshakespeare-data/val_loss-time-none.dat' using 1:3:4 with filledcurves fc rgb '#7f7f7f' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-time-layer.dat' using 1:3:4 with filledcurves fc rgb '#1f77b4' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-time-rms.dat' using 1:3:4 with filledcurves fc rgb '#d62728' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-time-prms.dat' using 1:3:4 with filledcurves fc rgb '#ff7f0e' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-time-dyt.dat' using 1:3:4 with filledcurves fc rgb '#9467bd' fs transparent solid 0.18 noborder notitle, \
     'lm-tinyshakespeare-data/val_loss-time-none.dat' using 1:2 with lines lc rgb '#7f7f7f' lw 2.5 title 'none (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-time-layer.dat' using 1:2 with lines lc rgb '#1f77b4' lw 2.5 title 'layer (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-time-rms.dat' using 1:2 with lines lc rgb '#d62728' lw 2.5 title 'rms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-time-prms.dat' using 1:2 with lines lc rgb '#ff7f0e' lw 2.5 title 'prms (3 runs, seeds 1,2,3)', \
     'lm-tinyshakespeare-data/val_loss-time-dyt.dat' using 1:2 with lines lc rgb '#9467bd' lw 2.5 title 'dyt (1 run, seed 1)'
unset multiplot
set output
}
