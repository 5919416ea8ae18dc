"""Bilinear resize at sizes other than the benchmark's half size (which takes the exact 2x2-mean path):
gpuaug (GPUAUG_CPU_PARALLEL=0, out=) vs a cv2.resize loop, one thread, 8 rotating buffers, median of 5."""
import numpy as np, time, gpuaug, cv2
cv2.setNumThreads(1)
rng = np.random.default_rng(0)
bufs = [rng.integers(0,256,(64,224,224,3),np.uint8) for _ in range(8)]
def tm(f):
    for i in range(8): f(i)
    ts=[]
    for i in range(5):
        t=time.perf_counter(); f(i); ts.append(time.perf_counter()-t)
    return sorted(ts)[2]*1e3
for size in [(160, 120), (300, 300)]:
    outs = [np.zeros((64,)+size+(3,), np.uint8) for _ in range(8)]
    g = tm(lambda i: gpuaug.resize(bufs[i], size, out=outs[i]))
    c = tm(lambda i: [cv2.resize(bufs[i][j], (size[1], size[0]), interpolation=cv2.INTER_LINEAR) for j in range(64)])
    print(f"resize bilinear 224x224 -> {size[0]}x{size[1]}: gpuaug {g:.2f} ms, OpenCV {c:.2f} ms, ratio {c/g:.3f}")
