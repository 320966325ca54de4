"""The project's measurements, run from the checkout's root as modules (``python -m bench.speed.env_server``):

- ``bench/speed/``: speed and memory benchmarks, each a ratio against a baseline measured in the
  same run on equal work (``bench.all`` runs them and writes the dated summary);
- ``bench/experiments/``: drivers of experiments that train or evaluate agents for their scores
  (the real-model recipes, the horizon schedules, the samplers, the demo's tuning);
- ``bench/common/``: what both share (equal work, process readings);
- ``bench/results/``: every committed table, figure and JSON result.
"""
