"""Where the staged upload's host time goes, piece by piece (us per call, median of 5 x 2000)."""
import cupy as cp
import numpy as np

from gpuaug.kernels._cuda import staging, upload
from hostmicro_t import t

st = staging()
a = np.zeros((256, 2), np.float32)
tab = np.zeros((256, 6), np.int64)
upload(a)
pin = cp.cuda.alloc_pinned_memory(1 << 20)
host = np.frombuffer(pin, np.uint8, 1 << 20)
dev = cp.empty(1 << 20, cp.uint8)
s = cp.cuda.get_current_stream()
ev = cp.cuda.Event(block=False, disable_timing=True)
t("upload(params 256x2)", lambda: upload(a))
t("upload(table + params)", lambda: upload(tab, a))
t("host[0:2048] = a.view(u8)", lambda: host.__setitem__(slice(0, 2048), a.reshape(-1).view(np.uint8)))
t("cp.empty(2048 u8)", lambda: cp.empty(2048, np.uint8))
t("cupy.cuda.alloc(2048)", lambda: cp.cuda.alloc(2048))
t("copy_from_host_async 2 KB", lambda: dev.data.copy_from_host_async(pin.ptr, 2048, s))
t("runtime.memcpyAsync 2 KB", lambda: cp.cuda.runtime.memcpyAsync(dev.data.ptr, pin.ptr, 2048, 1, s.ptr))
t("event.record", lambda: ev.record(s))
t("runtime.eventRecord", lambda: cp.cuda.runtime.eventRecord(ev.ptr, s.ptr))
t("cp.ndarray(shape, dtype, memptr)", lambda: cp.ndarray((256, 2), np.float32, memptr=dev.data + 256))
t("dev.data + 256", lambda: dev.data + 256)
t("get_current_stream", cp.cuda.get_current_stream)
t("lock", lambda: st._lock.__enter__() or st._lock.__exit__(None, None, None))
