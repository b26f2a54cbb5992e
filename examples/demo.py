"""The Python twin of examples/demo.cpp: record, look at the graph, sync, read, and see the metrics.

Run from the repository root: PYTHONPATH=python /usr/bin/python3 examples/demo.py
"""
import numpy as np

import lazuli as lz

x = lz.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
w = lz.ones(3, 2)

y = lz.relu(x @ w + 0.5)      # recorded, not run
s = y.sum()
print("state of y before sync:", lz.debug.tensor_state(y))
print(lz.debug.dump_graph([y, s]))

lz.sync(wait=True)            # one program for everything pending
print("state of y after sync:", lz.debug.tensor_state(y))
print("y =", y)
print("sum =", s.item())

lr = 0.1
for step in range(3):         # new values, same shapes: the compiled program is reused
    x -= lr * x               # in place; lr is a parameter, not a constant
    y = lz.relu(x @ w + 0.5)
    lz.sync()
print("after 3 more steps, y[0] =", y[0].tolist())
print("last execution:", lz.debug.recent_cuts()[-1])
print(lz.debug.short_metrics_report())
