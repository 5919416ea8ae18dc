// gpuaug__Kernel: one generic DALI GPU operator that runs any gpuaug CUDA C kernel of the
// table-driven signature
//
//   name<T, C[, extra template ints]>(const i64* src_table, const i64* dst_table,
//                                     const float* params, int P, int n[, partials, nparts])
//
// on a TensorList of HWC images (uint8 / float16 / float32, varshape allowed), once per batch,
// on DALI's stream, with no host synchronisation:
// - the per-sample descriptor tables (address, h, w, stride_y, stride_x, stride_c in elements,
//   gpuaug/_batch.py's descriptor_table) and the (N, P) float32 parameter matrix are written
//   into one pinned host slot and reach the device in one cuMemcpyHtoDAsync on ws.stream(),
//   into the slot's device buffer (both kept and reused: see Staging);
// - the kernel source travels in the operator's "source" argument (the .cu file with its
//   headers inlined by gpuaug.dali._native), so a serialized pipeline holds everything it
//   needs: Triton's DALI backend only has to load this library. The source is compiled at run
//   time with NVRTC for the device's architecture, once per (device, source, instance), and
//   cached for the process (users need no nvcc, and kernels/*.cu stays the one source).
//
// The CUDA driver and NVRTC are opened with dlopen: the library links only against DALI, so it
// builds on a machine without a GPU or CUDA libraries (only DALI's headers and the CUDA runtime
// headers that DALI's headers include) and loads there (CI checks the schema).
//
// Parameter programs ("program" argument) turn what the graph passes per sample into the
// kernel's parameter row, where the row needs the image's size (known here, on the host):
// - "identity": the row as given;
// - "affine": [matrix (6), inverse_map, interp, border, fill as uint8, float16, float32] ->
//   [interp, border, destination -> source matrix (6), fill...], inverted in double precision
//   (gpuaug/ops/_warp.py's invert_affine), singular matrices refused naming 'matrix';
// - "rotation": [angle, scale, cx, cy, interp, border, fill...] -> [interp, border, inverse of
//   OpenCV's getRotationMatrix2D (6), fill...], cx/cy NaN meaning the image centre
//   ((w - 1) / 2, (h - 1) / 2); the same double-precision maths as gpuaug/ops/_warp.py.
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dali/pipeline/operator/operator.h"
#include "gpuaug_host.h"

namespace gpuaug_dali {

using dali::DALIDataType;

// ---- the CUDA driver and NVRTC, opened at run time ---------------------------------------
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

struct Api {
  bool ok = false;
  std::string error;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetDevice)(CUdevice *);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemAllocHost)(void **, size_t);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                    const char *const *, const char *const *);
  nvrtcResult (*nvrtcAddNameExpression)(nvrtcProgram, const char *);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*nvrtcGetLoweredName)(nvrtcProgram, const char *, const char **);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char *);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *);
  const char *(*nvrtcGetErrorString)(nvrtcResult);
};

static void *open_first(const std::vector<std::string> &names, std::string *tried) {
  for (const auto &n : names) {
    if (n.empty()) continue;
    void *h = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h) return h;
    *tried += "\n  " + n + ": " + dlerror();
  }
  return nullptr;
}

template <typename F>
static bool sym(void *lib, const char *name, F *f, std::string *err) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  if (!*f) *err += std::string("missing symbol ") + name + "; ";
  return *f != nullptr;
}

static Api &api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void *cuda = open_first({"libcuda.so.1", "libcuda.so"}, &tried);
    if (!cuda) {
      a.error = "cannot open the CUDA driver (libcuda.so.1):" + tried;
      return;
    }
    // gpuaug.dali._native sets GPUAUG_NVRTC_LIBRARY to the NVRTC it found (CUDA toolkit or the
    // nvidia-cuda-nvrtc wheel); otherwise the loader's search path decides.
    const char *env = getenv("GPUAUG_NVRTC_LIBRARY");
    void *nvrtc = open_first({env ? env : "", "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}, &tried);
    if (!nvrtc) {
      a.error = "cannot open NVRTC (set GPUAUG_NVRTC_LIBRARY to libnvrtc.so's path, or pip install "
                "nvidia-cuda-nvrtc for your CUDA version):" + tried;
      return;
    }
    std::string e;
    bool ok = true;
#define GA_SYM(lib, name) ok &= sym(lib, #name, &a.name, &e)
#define GA_SYM2(lib, field, name) ok &= sym(lib, name, &a.field, &e)
    GA_SYM(cuda, cuInit);
    GA_SYM(cuda, cuCtxGetCurrent);
    GA_SYM(cuda, cuCtxSetCurrent);
    GA_SYM(cuda, cuCtxGetDevice);
    GA_SYM2(cuda, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    GA_SYM(cuda, cuDeviceGet);
    GA_SYM(cuda, cuDeviceGetAttribute);
    GA_SYM(cuda, cuModuleLoadData);
    GA_SYM(cuda, cuModuleGetFunction);
    GA_SYM(cuda, cuFuncSetAttribute);
    GA_SYM(cuda, cuLaunchKernel);
    GA_SYM2(cuda, cuMemAlloc, "cuMemAlloc_v2");
    GA_SYM2(cuda, cuMemFree, "cuMemFree_v2");
    GA_SYM2(cuda, cuMemAllocHost, "cuMemAllocHost_v2");
    GA_SYM(cuda, cuMemFreeHost);
    GA_SYM2(cuda, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    GA_SYM2(cuda, cuMemsetD8Async, "cuMemsetD8Async");
    GA_SYM(cuda, cuEventCreate);
    GA_SYM(cuda, cuEventRecord);
    GA_SYM(cuda, cuEventSynchronize);
    // profiling only (GPUAUG_DALI_NATIVE_PROFILE): optional
    a.cuEventElapsedTime = reinterpret_cast<decltype(a.cuEventElapsedTime)>(dlsym(cuda, "cuEventElapsedTime_v2"));
    if (!a.cuEventElapsedTime)
      a.cuEventElapsedTime = reinterpret_cast<decltype(a.cuEventElapsedTime)>(dlsym(cuda, "cuEventElapsedTime"));
    GA_SYM2(cuda, cuEventDestroy, "cuEventDestroy_v2");
    GA_SYM(cuda, cuGetErrorString);
    GA_SYM(nvrtc, nvrtcCreateProgram);
    GA_SYM(nvrtc, nvrtcAddNameExpression);
    GA_SYM(nvrtc, nvrtcCompileProgram);
    GA_SYM(nvrtc, nvrtcGetLoweredName);
    GA_SYM(nvrtc, nvrtcGetProgramLogSize);
    GA_SYM(nvrtc, nvrtcGetProgramLog);
    GA_SYM(nvrtc, nvrtcGetCUBINSize);
    GA_SYM(nvrtc, nvrtcGetCUBIN);
    GA_SYM(nvrtc, nvrtcGetPTXSize);
    GA_SYM(nvrtc, nvrtcGetPTX);
    GA_SYM(nvrtc, nvrtcDestroyProgram);
    GA_SYM(nvrtc, nvrtcGetErrorString);
#undef GA_SYM
#undef GA_SYM2
    if (!ok) {
      a.error = "the CUDA driver / NVRTC lack functions gpuaug needs: " + e;
      return;
    }
    a.ok = a.cuInit(0) == 0;
    if (!a.ok) a.error = "cuInit failed (no usable GPU or driver)";
  });
  return a;
}

static std::string cu_error(CUresult r) {
  const char *s = nullptr;
  if (api().cuGetErrorString) api().cuGetErrorString(r, &s);
  return std::to_string(r) + (s ? std::string(" (") + s + ")" : std::string());
}

#define GA_CU(op, call)                                                                     \
  do {                                                                                      \
    CUresult r_ = (call);                                                                   \
    DALI_ENFORCE(r_ == 0, (op) + std::string(": CUDA driver call " #call " failed: ") +     \
                              cu_error(r_));                                                \
  } while (0)

// ---- compiled kernels, per (device, source, instance) ---------------------------------------
struct ModuleCache {
  std::mutex lock;
  std::map<std::tuple<int, size_t, std::string>, std::pair<CUmodule, CUfunction>> fns;
};

static ModuleCache &modules() {
  static ModuleCache m;
  return m;
}

// <GPUAUG_DALI_KERNEL_CACHE>/<hash of source, name, architecture>.cubin, or "" (no disk cache).
static std::string disk_cache_path(const std::string &source, const std::string &name, int major, int minor) {
  const char *dir = getenv("GPUAUG_DALI_KERNEL_CACHE");
  if (!dir || !*dir) return "";
  char hex[40];
  const size_t h = std::hash<std::string>()(source + "\n" + name + "\nsm_" + std::to_string(major) +
                                            std::to_string(minor));
  snprintf(hex, sizeof(hex), "%016zx", h);
  return std::string(dir) + "/" + hex + ".cubin";
}

static CUfunction get_function(const std::string &op, int device, const std::string &source,
                               const std::string &name_expr) {
  auto &A = api();
  size_t h = std::hash<std::string>()(source);
  auto key = std::make_tuple(device, h, name_expr);
  auto &cache = modules();
  std::lock_guard<std::mutex> g(cache.lock);
  auto it = cache.fns.find(key);
  if (it != cache.fns.end()) return it->second.second;

  CUdevice dev;
  GA_CU(op, A.cuDeviceGet(&dev, device));
  int major = 0, minor = 0;
  GA_CU(op, A.cuDeviceGetAttribute(&major, 75, dev));  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  GA_CU(op, A.cuDeviceGetAttribute(&minor, 76, dev));  // ..._MINOR
  // A CUBIN from the disk cache (GPUAUG_DALI_KERNEL_CACHE, set by gpuaug.dali._native to
  // <cache>/dali_native/kernels: a fresh process -- a deserialized pipeline, Triton -- skips
  // NVRTC), else compiled: a CUBIN for the device when this NVRTC knows its architecture, else
  // PTX for the driver's JIT (not cached).
  const std::string disk = disk_cache_path(source, name_expr, major, minor);
  if (!disk.empty()) {
    std::ifstream f(disk, std::ios::binary);
    std::string blob((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t z = blob.find('\0');
    if (f.good() || f.eof()) {
      if (z != std::string::npos && z + 1 < blob.size()) {
        CUmodule mod;
        CUfunction fn;
        if (A.cuModuleLoadData(&mod, blob.data() + z + 1) == 0) {
          if (A.cuModuleGetFunction(&fn, mod, blob.substr(0, z).c_str()) == 0) {
            cache.fns[key] = {mod, fn};
            return fn;
          }
        }
      }
    }
  }
  std::vector<char> image;
  std::string log;
  for (int attempt = 0; attempt < 2 && image.empty(); ++attempt) {
    nvrtcProgram prog;
    nvrtcResult r = A.nvrtcCreateProgram(&prog, source.c_str(), (op + ".cu").c_str(), 0, nullptr, nullptr);
    DALI_ENFORCE(r == 0, op + ": nvrtcCreateProgram failed: " + A.nvrtcGetErrorString(r));
    A.nvrtcAddNameExpression(prog, name_expr.c_str());
    std::string arch = std::string(attempt == 0 ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") +
                       std::to_string(major) + std::to_string(minor);
    const char *opts[] = {"-std=c++17", arch.c_str()};
    r = A.nvrtcCompileProgram(prog, 2, opts);
    if (r == 0) {
      const char *lowered = nullptr;
      A.nvrtcGetLoweredName(prog, name_expr.c_str(), &lowered);
      std::string low = lowered ? lowered : name_expr;  // extern "C" kernels: the name itself
      size_t n = 0;
      if (attempt == 0) {
        A.nvrtcGetCUBINSize(prog, &n);
        image.resize(n);
        A.nvrtcGetCUBIN(prog, image.data());
      } else {
        A.nvrtcGetPTXSize(prog, &n);
        image.resize(n);
        A.nvrtcGetPTX(prog, image.data());
      }
      A.nvrtcDestroyProgram(&prog);
      if (attempt == 0 && !disk.empty()) {  // write then rename: readers see whole files only
        const std::string tmp = disk + ".tmp" + std::to_string(getpid());
        {
          std::ofstream f(tmp, std::ios::binary);
          f.write(low.c_str(), low.size() + 1);
          f.write(image.data(), image.size());
        }
        if (std::rename(tmp.c_str(), disk.c_str()) != 0) std::remove(tmp.c_str());
      }
      CUmodule mod;
      GA_CU(op, A.cuModuleLoadData(&mod, image.data()));
      CUfunction fn;
      GA_CU(op, A.cuModuleGetFunction(&fn, mod, low.c_str()));
      cache.fns[key] = {mod, fn};
      return fn;
    }
    size_t ls = 0;
    A.nvrtcGetProgramLogSize(prog, &ls);
    std::string l(ls, '\0');
    A.nvrtcGetProgramLog(prog, &l[0]);
    log += arch + ": " + A.nvrtcGetErrorString(r) + "\n" + l + "\n";
    A.nvrtcDestroyProgram(&prog);
  }
  DALI_FAIL(op + ": NVRTC could not compile " + name_expr + ":\n" + log);
}

// ---- staging ring: pinned host + device parameter buffers, reused ----------------------------
// One slot per batch in flight: a pinned host buffer (tables and parameter rows are written
// there) and a device buffer of the same size, both kept for the operator's lifetime. A batch
// takes the next slot, waits on the event recorded behind that slot's *last kernels* (a host
// wait on work kSlots batches old, normally long done; never a device synchronisation), fills
// the host side, copies it with one cuMemcpyHtoDAsync on DALI's stream and records the event
// again after its launches. (The first version took the device side from cuMemAllocAsync /
// cuMemFreeAsync per batch: with the default pool's release threshold of 0 every
// synchronisation hands the pool's memory back, so the next batch's allocation maps fresh
// physical memory, once per operator per batch.) Buffers only grow, rarely (a larger batch).
class Staging {
 public:
  static constexpr int kSlots = 8;
  ~Staging() {
    for (auto &s : slots_) {
      if (s.event) api().cuEventSynchronize(s.event);
      if (s.host) api().cuMemFreeHost(s.host);
      if (s.dev) api().cuMemFree(s.dev);
    }
  }
  // The next slot, at least `bytes` large on both sides.
  void *get(const std::string &op, size_t bytes, int *index, CUdeviceptr *dev) {
    auto &A = api();
    Slot &s = slots_[next_];
    *index = next_;
    next_ = (next_ + 1) % kSlots;
    if (s.event) GA_CU(op, A.cuEventSynchronize(s.event));
    if (s.size < bytes) {
      if (s.host) A.cuMemFreeHost(s.host);
      if (s.dev) A.cuMemFree(s.dev);
      s.host = nullptr;
      s.dev = 0;
      s.size = 0;
      const size_t sz = std::max<size_t>(bytes + bytes / 4, 1 << 16);
      GA_CU(op, A.cuMemAllocHost(&s.host, sz));
      GA_CU(op, A.cuMemAlloc(&s.dev, sz));
      s.size = sz;
    }
    *dev = s.dev;
    return s.host;
  }
  // After the batch's last launch (also when a launch threw): the slot is free once the
  // stream passes this point.
  void record(int index, CUstream stream) {
    auto &A = api();
    Slot &s = slots_[index];
    if (!s.event && A.cuEventCreate(&s.event, 2) != 0) s.event = nullptr;  // CU_EVENT_DISABLE_TIMING
    if (s.event) A.cuEventRecord(s.event, stream);
  }

 private:
  struct Slot {
    void *host = nullptr;
    CUdeviceptr dev = 0;
    size_t size = 0;
    CUevent event = nullptr;
  };
  Slot slots_[kSlots];
  int next_ = 0;
};

// GPUAUG_DALI_NATIVE_PROFILE=1: per operator instance, host time of RunImpl and device time of
// its launches (CUDA events, read back one call later, so no extra synchronisation in the
// loop), printed to stderr when the operator is destroyed (and every 50 calls). For finding
// where a pipeline's time goes; off by default.
static bool profiling() {
  static const bool on = [] {
    const char *e = getenv("GPUAUG_DALI_NATIVE_PROFILE");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

class Profile {
 public:
  explicit Profile(std::string name) : name_(std::move(name)) {}
  ~Profile() { report(); }
  void host(double ms) { host_ms_ += ms; ++calls_; }
  // events bracketing this call's launches; the previous call's pair is read now.
  void device(CUevent a, CUevent b) {
    collect();
    pending_a_ = a;
    pending_b_ = b;
    if (calls_ % 50 == 0) report();
  }
  void report() {
    collect();
    if (calls_)
      fprintf(stderr, "[gpuaug native profile] %s: %ld calls, host %.4f ms/call, device %.4f ms/call (%ld timed)\n",
              name_.c_str(), calls_, host_ms_ / calls_, timed_ ? dev_ms_ / timed_ : 0.0, timed_);
  }

 private:
  void collect() {
    if (!pending_a_) return;
    float ms = 0;
    if (api().cuEventElapsedTime && api().cuEventSynchronize(pending_b_) == 0 &&
        api().cuEventElapsedTime(&ms, pending_a_, pending_b_) == 0) {
      dev_ms_ += ms;
      ++timed_;
    }
    api().cuEventDestroy(pending_a_);
    api().cuEventDestroy(pending_b_);
    pending_a_ = pending_b_ = nullptr;
  }
  std::string name_;
  double host_ms_ = 0, dev_ms_ = 0;
  long calls_ = 0, timed_ = 0;
  CUevent pending_a_ = nullptr, pending_b_ = nullptr;
};

static const char *ctype(DALIDataType t) {
  switch (t) {
    case ::DALI_UINT8: return "unsigned char";
    case ::DALI_FLOAT16: return "gpuaug::half";
    case ::DALI_FLOAT: return "float";
    default: return nullptr;
  }
}

static int type_size(DALIDataType t) { return t == ::DALI_UINT8 ? 1 : t == ::DALI_FLOAT16 ? 2 : 4; }

// ---- what gpuaug__Kernel and gpuaug__Policy share ------------------------------------------
// The staging ring, the per-instance kernel table (no hashing of the source per batch), the
// SM count, the CUDA context check and the optional profile.
class Launcher : public dali::Operator<dali::GPUBackend> {
 public:
  explicit Launcher(const dali::OpSpec &spec) : dali::Operator<dali::GPUBackend>(spec) {}

 protected:
  // Scope guard of RunImpl: records the staging slot's event after the launches (also when a
  // launch threw) and, when profiling, the call's host time and the events bracketing its
  // launches.
  struct Release {
    Launcher *k;
    int slot;
    CUstream stream;
    CUevent a = nullptr;
    Release(Launcher *k_, int s, CUstream st) : k(k_), slot(s), stream(st) {
      if (profiling() && api().cuEventCreate(&a, 0) == 0) api().cuEventRecord(a, stream);
    }
    ~Release() {
      k->staging_.record(slot, stream);
      if (!profiling()) return;
      CUevent b = nullptr;
      if (a && api().cuEventCreate(&b, 0) == 0) {
        api().cuEventRecord(b, stream);
        k->profile().device(a, b);
      }
      k->profile().host(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - k->run_t0_).count());
    }
  };

  // The driver API is usable and a context is current on this thread (DALI's, or the device's
  // primary context); the start of every RunImpl.
  void begin_run() {
    run_t0_ = std::chrono::steady_clock::now();
    auto &A = api();
    DALI_ENFORCE(A.ok, op_ + ": cannot run: " + A.error);
    CUcontext ctx = nullptr;
    A.cuCtxGetCurrent(&ctx);
    if (!ctx) {
      CUdevice dev;
      GA_CU(op_, A.cuDeviceGet(&dev, device_));
      GA_CU(op_, A.cuDevicePrimaryCtxRetain(&ctx, dev));
      GA_CU(op_, A.cuCtxSetCurrent(ctx));
    }
  }

  Profile &profile() {
    if (!profile_) profile_ = std::make_unique<Profile>(op_ + " (" + profile_name_ + ")");
    return *profile_;
  }

  CUfunction function(const std::string &name) {
    auto it = functions_.find(name);
    if (it != functions_.end()) return it->second;
    return functions_[name] = get_function(op_, device_, source_, name);
  }

  int sms() {
    if (sms_ == 0) {
      CUdevice d;
      GA_CU(op_, api().cuDeviceGet(&d, device_));
      GA_CU(op_, api().cuDeviceGetAttribute(&sms_, 16, d));  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    }
    return sms_;
  }

  std::string op_, source_, profile_name_;
  int device_ = 0, sms_ = 0;
  Staging staging_;
  std::unique_ptr<Profile> profile_;
  std::chrono::steady_clock::time_point run_t0_;
  std::map<std::string, CUfunction> functions_;
};

class Chain;

class Kernel : public Launcher {
  friend class Chain;  // runs Kernels as the steps of one operator

 public:
  explicit Kernel(const dali::OpSpec &spec) : Launcher(spec) {
    op_ = "gpuaug.dali." + spec.GetArgument<std::string>("op");
    source_ = spec.GetArgument<std::string>("source");
    kernel_ = spec.GetArgument<std::string>("kernel");
    profile_name_ = kernel_;
    signature_ = spec.GetArgument<std::string>("signature");
    program_ = spec.GetArgument<std::string>("program");
    template_extra_ = spec.GetRepeatedArgument<int>("template_extra");
    channels_ = spec.GetRepeatedArgument<int>("channels");
    device_ = spec.GetArgument<int>("device_id");
    num_params_ = spec.GetArgument<int>("num_params");
    node_names_ = spec.GetRepeatedArgument<std::string>("node_names");
    node_expect_ = spec.GetRepeatedArgument<int>("node_expect");
    mean_ = spec.GetArgument<int>("mean");
    dense_kernel_ = spec.GetArgument<std::string>("dense_kernel");
    out_size_ = spec.GetRepeatedArgument<int>("out_size");
    out_dtype_ = spec.GetArgument<std::string>("out_dtype");
    out_layout_ = spec.GetArgument<std::string>("out_layout");
    in_layout_ = spec.GetArgument<std::string>("in_layout");
    DALI_ENFORCE(in_layout_ == "HWC" || in_layout_ == "CHW",
                 op_ + ": argument 'layout': got '" + in_layout_ + "'; expected 'HWC' or 'CHW'");
    in_chw_ = in_layout_ == "CHW";
    pad_output_ = spec.GetArgument<bool>("pad_output");
    cmn_co_ = spec.GetArgument<bool>("cmn_co");
    launch_ = spec.GetArgument<std::string>("launch");
    DALI_ENFORCE(launch_ == "grid" || launch_ == "rows" || launch_ == "noise" || launch_ == "separable",
                 op_ + ": argument 'launch': got '" + launch_ + "'; expected 'grid', 'rows', 'noise' or 'separable'");
    tile_ = spec.GetRepeatedArgument<int>("tile");
    DALI_ENFORCE(tile_.size() == 2 && tile_[0] > 0 && tile_[1] > 0,
                 op_ + ": argument 'tile': expected (width, height) > 0");
    segments_ = spec.GetRepeatedArgument<int>("segments");
    for (int g : segments_) {
      DALI_ENFORCE(g != 0 && g >= -kMaxNodes, op_ + ": argument 'segments': got " + std::to_string(g) +
                                                  "; expected a constant count > 0 or -1..-" + std::to_string(kMaxNodes));
      if (g < 0) num_nodes_ = std::max(num_nodes_, -g);
    }
    out_shape_ = spec.GetArgument<std::string>("out_shape");
    out_channels_ = spec.GetArgument<int>("out_channels");
    DALI_ENFORCE(out_channels_ == -1 || ((out_channels_ == 1 || out_channels_ == 3) && signature_ == "colour"),
                 op_ + ": argument 'num_output_channels': got " + std::to_string(out_channels_) +
                 "; expected 1 or 3 (colour kernels that choose their output channels)");
    DALI_ENFORCE(out_shape_ == "same" || out_shape_ == "swap" || out_shape_ == "rot90" || out_shape_ == "pad",
                 op_ + ": argument 'out_shape': got '" + out_shape_ + "'; expected 'same', 'swap', 'rot90' or 'pad'");
    DALI_ENFORCE(out_dtype_.empty() || out_dtype_ == "float32" || out_dtype_ == "float16",
                 op_ + ": argument 'dtype': got '" + out_dtype_ + "'; expected 'float32' or 'float16'");
    DALI_ENFORCE(out_layout_ == "HWC" || out_layout_ == "CHW",
                 op_ + ": argument 'output_layout': got '" + out_layout_ + "'; expected 'HWC' or 'CHW'");
    DALI_ENFORCE((out_dtype_.empty() && out_layout_ == in_layout_ && !pad_output_) || signature_ == "cmn",
                 op_ + ": arguments 'out_dtype' / 'out_layout' / 'pad_output' are for signature 'cmn' (other ops "
                 "write the input's layout)");
    DALI_ENFORCE(out_size_.empty() || (out_size_.size() == 2 && out_size_[0] > 0 && out_size_[1] > 0),
                 op_ + ": argument 'size': got " + std::to_string(out_size_.size()) +
                 " values; expected (height, width), both > 0");
    DALI_ENFORCE(mean_ >= -1 && mean_ <= 1 && (mean_ < 0 || signature_ == "colour"),
                 op_ + ": argument 'mean': got " + std::to_string(mean_) +
                 "; expected -1 (none), 0 or 1 (with signature 'colour')");
    dtype_cols_ = spec.GetRepeatedArgument<int>("dtype_cols");
    dtype_values_ = spec.GetRepeatedArgument<float>("dtype_values");
    DALI_ENFORCE(dtype_values_.size() == 3 * dtype_cols_.size(),
                 op_ + ": argument 'dtype_values': got " + std::to_string(dtype_values_.size()) +
                 " values; expected 3 (uint8, float16, float32) per entry of 'dtype_cols' (" +
                 std::to_string(dtype_cols_.size()) + ")");
    DALI_ENFORCE(signature_ == "generic" || signature_ == "colour" || signature_ == "cmn" || signature_ == "equalize",
                 op_ + ": argument 'signature': got '" + signature_ + "'; expected 'generic', 'colour', 'cmn' or "
                 "'equalize'");
    DALI_ENFORCE(program_ == "identity" || program_ == "rotation" || program_ == "affine" ||
                     program_ == "perspective" || program_ == "cmn" || program_ == "rot90" || program_ == "crop" ||
                     program_ == "center_crop" || program_ == "pad" || program_ == "resize" ||
                     program_ == "resized_crop" || program_ == "erase" || program_ == "median" ||
                     program_ == "noise" || program_ == "salt_pepper" || program_ == "grid_mask" ||
                     program_ == "box" || program_ == "gaussian",
                 op_ + ": argument 'program': got '" + program_ + "'; expected 'identity', 'rotation', 'affine', "
                 "'perspective', 'cmn', 'rot90', 'crop' or 'center_crop'");
    DALI_ENFORCE((program_ != "crop" && program_ != "center_crop" && program_ != "resize" &&
                  program_ != "resized_crop") || out_size_.size() == 2,
                 op_ + ": programs 'crop' / 'center_crop' / 'resize' / 'resized_crop' need 'out_size' (the output's "
                 "height, width)");
    DALI_ENFORCE(out_size_.empty() || signature_ != "colour",
                 op_ + ": argument 'out_size': not for signature 'colour'");
    DALI_ENFORCE(!source_.empty(), op_ + ": argument 'source': empty; expected the kernel's CUDA C source");
    DALI_ENFORCE(!kernel_.empty(), op_ + ": argument 'kernel': empty; expected a kernel template name");
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &in = ws.Input<dali::GPUBackend>(0);
    const DALIDataType t = in.type();
    DALI_ENFORCE(ctype(t) != nullptr, op_ + ": x: got dtype " + dali::to_string(t) +
                                          "; expected one of uint8, float16, float32");
    DALI_ENFORCE(in.sample_dim() == 3, op_ + ": x: got " + std::to_string(in.sample_dim()) +
                                           "-D samples; expected HWC images (3-D)");
    const auto &layout = in.GetLayout();
    DALI_ENFORCE(layout.empty() || layout == in_layout_,
                 op_ + ": input 'data': got layout '" + layout.str() + "'; the operator was defined for " +
                 in_layout_ + " (the gd op's layout argument)");
    const int n = in.num_samples();
    for (int i = 0; i < n; ++i) {
      const auto s = dims(in.tensor_shape(i));
      bool okc = false;
      for (int c : channels_) okc |= s[2] == c;
      DALI_ENFORCE(okc, op_ + ": x: got " + std::to_string(s[2]) + " channels (sample " + std::to_string(i) +
                            "); expected one of " + join(channels_));
      DALI_ENFORCE(s[0] * s[1] * s[2] <= 2147483647LL,
                   op_ + ": x: sample " + std::to_string(i) + " holds over 2**31 - 1 elements (the kernels "
                   "index within an image with 32-bit integers)");
    }
    output_desc.resize(1);
    output_desc[0].shape = in.shape();
    std::vector<int> quarter(n, 0);  // rot90: the per-sample k (odd: height and width swap)
    if (out_shape_ == "rot90") {
      for (int i = 0; i < n; ++i) quarter[i] = rot90_k(ws, i, n);
    }
    for (int i = 0; i < n; ++i) {
      const auto s = dims(in.tensor_shape(i));
      int64_t h = out_size_.empty() ? s[0] : out_size_[0], w = out_size_.empty() ? s[1] : out_size_[1];
      if (out_shape_ == "pad") {
        const auto p = pad_sides(ws, i, n);
        h = s[0] + p[0] + p[1];
        w = s[1] + p[2] + p[3];
        DALI_ENFORCE(h * w * s[2] <= 2147483647LL, op_ + ": argument 'padding': sample " + std::to_string(i) +
                                                       " would hold over 2**31 - 1 elements");
      }
      if (out_shape_ == "swap" || (out_shape_ == "rot90" && (quarter[i] & 1))) std::swap(h, w);
      if (!out_size_.empty() && signature_ == "cmn")
        DALI_ENFORCE(h <= s[0] && w <= s[1], op_ + ": argument 'crop': got (" + std::to_string(h) + ", " +
                                                 std::to_string(w) + "); sample " + std::to_string(i) + " is " +
                                                 std::to_string(s[0]) + "x" + std::to_string(s[1]) +
                                                 "; expected a window no larger than every image");
      const int64_t co = out_channels(static_cast<int>(s[2]));
      output_desc[0].shape.set_tensor_shape(
          i, out_layout_ == "CHW" ? dali::TensorShape<>{co, h, w} : dali::TensorShape<>{h, w, co});
    }
    output_desc[0].type = out_dtype_.empty() ? t : out_dtype_ == "float16" ? ::DALI_FLOAT16 : ::DALI_FLOAT;
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    begin_run();
    auto &A = api();
    const auto &in = ws.Input<dali::GPUBackend>(0);
    auto &out = ws.Output<dali::GPUBackend>(0);
    out.SetLayout(out_layout_);
    const int n = in.num_samples();
    if (n == 0) return;
    const DALIDataType t = in.type();
    const int C = static_cast<int>(dims(in.tensor_shape(0))[2]);
    CUstream stream = reinterpret_cast<CUstream>(ws.stream());

    // Parameters: a per-sample argument input or one constant row.
    auto &rows = rows_;
    rows.resize(n);
    if (!segments_.empty()) {
      assemble_rows(ws, n);
    } else if (spec_.HasTensorArgument("params")) {
      const auto &p = ws.ArgumentInput("params");
      DALI_ENFORCE(p.num_samples() == n, op_ + ": argument 'params': got " + std::to_string(p.num_samples()) +
                                             " samples for a batch of " + std::to_string(n));
      DALI_ENFORCE(p.type() == ::DALI_FLOAT, op_ + ": argument 'params': got type " +
                                                    dali::to_string(p.type()) + "; expected float32");
      for (int i = 0; i < n; ++i) {
        const float *v = p.tensor<float>(i);
        rows[i].assign(v, v + p.tensor_shape(i).num_elements());
      }
    } else {
      if (const_params_.empty() && !const_read_) {
        const_params_ = spec_.GetRepeatedArgument<float>("params");
        const_read_ = true;
      }
      for (auto &r : rows) r.assign(const_params_.begin(), const_params_.end());
    }
    check_node_shapes(ws, n);
    for (int i = 0; i < n; ++i)
      DALI_ENFORCE(num_params_ < 0 || rows[i].size() == size_t(num_params_),
                   op_ + ": argument 'params': sample " + std::to_string(i) + " has " +
                   std::to_string(rows[i].size()) + " values; expected " + std::to_string(num_params_) +
                   " (a per-sample parameter of the wrong size?)");
    const int ti = t == ::DALI_UINT8 ? 0 : t == ::DALI_FLOAT16 ? 1 : 2;
    for (auto &r : rows) {
      for (size_t k = 0; k < dtype_cols_.size(); ++k) {
        DALI_ENFORCE(dtype_cols_[k] >= 0 && size_t(dtype_cols_[k]) < r.size(),
                     op_ + ": argument 'dtype_cols': column " + std::to_string(dtype_cols_[k]) +
                     " is outside the parameter row of " + std::to_string(r.size()) + " values");
        r[dtype_cols_[k]] = dtype_values_[3 * k + ti];
      }
    }
    if (program_ == "rotation") rotation(in, &rows, C, ti);
    if (program_ == "affine") affine(&rows, C, ti);
    if (program_ == "perspective") perspective(&rows, C, ti);
    if (program_ == "rot90")
      for (int i = 0; i < n; ++i) rows[i].assign(1, float(rot90_k(ws, i, n)));
    if (program_ == "crop") crop(in, &rows);
    if (program_ == "resize" || program_ == "resized_crop") resample(in, &rows);
    if (program_ == "erase") erase(&rows, C, ti);
    if (program_ == "noise" || program_ == "salt_pepper") seeded(&rows);
    if (program_ == "grid_mask") grid_mask(&rows);
    if (program_ == "box") box(&rows);
    if (program_ == "gaussian") {  // [k, taps] for uint8, then for floats: the images' half
      for (auto &r : rows) {
        DALI_ENFORCE(!r.empty() && size_t(r[0]) + 1 < r.size(), op_ + ": argument 'params': malformed taps");
        const size_t k8 = size_t(r[0]);
        if (ti == 0) {
          r.resize(1 + k8);
        } else {
          r.erase(r.begin(), r.begin() + 1 + k8);
        }
      }
    }
    std::string variant;  // a kernel name suffix chosen per batch
    if (program_ == "median") {  // gpuaug.median_blur: k in {3, 5}; the _3 kernel when every k is 3
      bool all3 = true;
      for (int i = 0; i < n; ++i) {
        DALI_ENFORCE(rows[i].size() == 1 && (rows[i][0] == 3.f || rows[i][0] == 5.f),
                     op_ + ": argument 'kernel_size': got " + (rows[i].empty() ? std::string("nothing") :
                     std::to_string(rows[i][0])) + " for sample " + std::to_string(i) + "; expected 3 or 5");
        all3 = all3 && rows[i][0] == 3.f;
      }
      if (all3) variant = "_3";
    }
    if (program_ == "pad") {
      for (int i = 0; i < n; ++i) {
        const auto p = pad_sides(ws, i, n);
        const double v = rows[i][5];
        double stored;  // gpuaug.ops._launch.as_stored: the value as the output stores it
        if (ti == 0) {
          stored = std::min(255.0, std::max(0.0, std::floor(v + 0.5)));
        } else if (ti == 1) {
          stored = gpuaug_host::round_half(v);
        } else {
          stored = static_cast<float>(v);
        }
        rows[i].assign({float(p[0]), float(p[2]), rows[i][4], float(stored)});
      }
    }
    if (program_ == "center_crop") {
      for (int i = 0; i < n; ++i) {
        const auto s = dims(in.tensor_shape(i));
        rows[i].assign({float(gpuaug_host::center_offset(s[0], out_size_[0])),
                        float(gpuaug_host::center_offset(s[1], out_size_[1]))});
      }
    }
    if (program_ == "cmn") cmn(&rows, C);
    const size_t P = rows[0].size();
    for (int i = 1; i < n; ++i)
      DALI_ENFORCE(rows[i].size() == P, op_ + ": argument 'params': sample " + std::to_string(i) + " has " +
                                            std::to_string(rows[i].size()) + " values, sample 0 has " +
                                            std::to_string(P) + "; every sample needs the same number");

    // Tables and parameters, one pinned slot, one copy.
    const size_t tab_bytes = size_t(n) * 6 * sizeof(int64_t);
    const size_t par_off = 2 * tab_bytes;
    const size_t total = par_off + std::max<size_t>(1, size_t(n) * P) * sizeof(float);
    const size_t part_off = (total + 7) / 8 * 8;
    const size_t part_max = mean_ >= 0 ? size_t(n) * kMaxParts * sizeof(double) : 0;  // partial sums
    // equalize: the per-sample histograms (uint32) and lookup tables (float32, the apply
    // kernel's parameter rows) live behind the rest of the slot's device buffer
    const bool eq = signature_ == "equalize";
    const size_t eq_off = (part_off + part_max + 15) / 16 * 16;
    const int eqP = C * 256 + 1;
    const size_t eq_hist = eq ? size_t(n) * C * 256 * sizeof(uint32_t) : 0;
    const size_t eq_bytes = eq ? eq_hist + size_t(n) * eqP * sizeof(float) : 0;
    int slot;
    CUdeviceptr dev = 0;
    char *host = static_cast<char *>(staging_.get(op_, eq_off + eq_bytes, &slot, &dev));
    int64_t *st = reinterpret_cast<int64_t *>(host), *dt = st + 6 * n;
    float *par = reinterpret_cast<float *>(host + par_off);
    const int es = type_size(t);
    int hmax = 0, wmax = 0;
    for (int i = 0; i < n; ++i) {
      const auto s = dims(in.tensor_shape(i));
      const int64_t h = s[0], w = s[1], c = s[2];
      DALI_ENFORCE(c == C, op_ + ": x: got " + std::to_string(c) + " channels in sample " + std::to_string(i) +
                               " and " + std::to_string(C) + " in sample 0; expected one channel count for the batch");
      int64_t src[6] = {int64_t(reinterpret_cast<uintptr_t>(in.raw_tensor(i))), h, w, in_chw_ ? w : w * c,
                        in_chw_ ? 1 : c, in_chw_ ? h * w : 1};
      const auto &os = out.tensor_shape(i);
      const bool chw = out_layout_ == "CHW";
      const int64_t oh = chw ? os[1] : os[0], ow = chw ? os[2] : os[1], oc = chw ? os[0] : os[2];
      int64_t dst[6] = {int64_t(reinterpret_cast<uintptr_t>(out.raw_mutable_tensor(i))), oh, ow,
                        chw ? ow : ow * oc, chw ? 1 : oc, chw ? oh * ow : 1};
      std::memcpy(st + 6 * i, src, sizeof(src));
      std::memcpy(dt + 6 * i, dst, sizeof(dst));
      hmax = std::max<int>(hmax, oh);
      wmax = std::max<int>(wmax, ow);
      if (P) std::memcpy(par + i * P, rows[i].data(), P * sizeof(float));
    }
    // Colour ops: the packed fast path when every sample allows it (gpuaug/ops/_colour.py's
    // packed_layout, mirrored so that both paths launch the same kernels with the same split of
    // the mean's partial sums, hence identical results).
    const bool colour = signature_ == "colour";
    bool packed = false;
    long long items = 0, sum_items = 0;
    bool sum_packed = false;
    int nparts = 0;
    if (colour) {
      packed = gpuaug_host::packed_layout(st, dt, n, C, out_channels(C), es, &items);
      if (mean_ >= 0) {
        sum_packed = gpuaug_host::packed_layout(st, nullptr, n, C, C, es, &sum_items);
        if (!sum_packed) {
          sum_items = 0;
          for (int i = 0; i < n; ++i) sum_items = std::max<long long>(sum_items, st[6 * i + 1] * st[6 * i + 2]);
        }
        nparts = gpuaug_host::mean_parts(sms(), n, sum_items);
      }
    }
    // the slot is released behind this batch's last launch, also when a launch or a compile throws
    Release release{this, slot, stream};
    GA_CU(op_, A.cuMemcpyHtoDAsync(dev, host, total, stream));

    const std::string targs = std::string("<") + ctype(t) + ", " + std::to_string(C);
    std::string name = kernel_ + (packed ? "_packed" : "") + variant + targs;
    for (int e : template_extra_) name += ", " + std::to_string(e);
    name += ">";

    CUdeviceptr src_t = dev, dst_t = dev + tab_bytes, par_d = dev + par_off;
    int Pi = static_cast<int>(P), ni = n;
    CUdeviceptr partials = nparts ? dev + part_off : 0;
    const unsigned gz = std::min(n, 65535);
    if (nparts) {
      CUfunction sum = function(std::string(sum_packed ? "gpuaug_gray_sum_packed" : "gpuaug_gray_sum") + targs +
                                ", " + std::to_string(mean_) + ">");
      int bcol = 0;
      void *sargs[] = {&src_t, &par_d, &Pi, &ni, &bcol, &partials, &nparts};
      GA_CU(op_, A.cuLaunchKernel(sum, nparts, gz, 1, 256, 1, 1, 0, stream, sargs, nullptr));
    }
    void *args[] = {&src_t, &dst_t, &par_d, &Pi, &ni, &partials, &nparts};
    if (eq) {
      // gpuaug/ops/equalize.py's _tables_cuda, then the apply kernel with the tables as its rows:
      // histogram per sample and channel, the lookup tables, the lookup (exact, as every path of
      // the standalone op)
      if (hmax <= 0 || wmax <= 0) return;
      CUdeviceptr hist = dev + eq_off, lut = dev + eq_off + eq_hist;
      GA_CU(op_, A.cuMemsetD8Async(hist, 0, eq_hist, stream));
      const unsigned gx = (wmax + 31) / 32, gy = (hmax + 7) / 8;
      void *hargs[] = {&src_t, &hist, &ni};
      GA_CU(op_, A.cuLaunchKernel(function("gpuaug_equalize_hist" + targs + ">"), gx, gy, gz, 32, 8, 1, 0, stream,
                                  hargs, nullptr));
      int P2 = eqP, C2 = C, is_float = t != ::DALI_UINT8;
      void *largs[] = {&hist, &lut, &P2, &C2, &is_float};
      GA_CU(op_, A.cuLaunchKernel(function("gpuaug_equalize_lut"), unsigned(n) * C, 1, 1, 256, 1, 1, 0, stream, largs,
                                  nullptr));
      void *aargs[] = {&src_t, &dst_t, &lut, &P2, &ni};
      GA_CU(op_, A.cuLaunchKernel(function(kernel_ + targs + ">"), gx, gy, gz, 32, 8, 1, 0, stream, aargs, nullptr));
      return;
    }
    if (signature_ == "cmn") {
      // gpuaug/ops/crop_mirror_normalize.py: <T, C, O, CO>; _intensity.cmn_vec_fast's vector path
      const int co = out_channels(C);
      const int osz = out_dtype_ == "float16" ? 2 : 4;
      const std::string o = out_dtype_ == "float16" ? "gpuaug::half" : "float";
      const std::string cargs = targs + ", " + o + (cmn_co_ ? ", " + std::to_string(co) : std::string());
      const int planar = gpuaug_host::cmn_vec_layout(dt, n, co, osz);
      if (planar >= 0) {
        CUfunction vf = function(kernel_ + "_vec" + cargs + (planar ? ", true>" : ", false>"));
        GA_CU(op_, A.cuLaunchKernel(vf, (wmax + 127) / 128, (hmax + 31) / 32, gz, 32, 8, 1, 0, stream, args, nullptr));
      } else if (hmax > 0 && wmax > 0) {
        GA_CU(op_, A.cuLaunchKernel(function(kernel_ + cargs + ">"), (wmax + 31) / 32, (hmax + 7) / 8, gz, 32, 8, 1, 0,
                                    stream, args, nullptr));
      }
    } else if (!dense_kernel_.empty() && !in_chw_ && gpuaug_host::dense_batch(st, dt, n, C, es)) {
      // gpuaug/ops/_warp.py's dense_fast: C-contiguous uniform batches take <name>_dense (no
      // tables, 32-bit offsets), the kernel the standalone op runs on such a batch.
      std::string dname = dense_kernel_ + targs;
      for (int e : template_extra_) dname += ", " + std::to_string(e);
      CUfunction dfn = function(dname + ">");
      CUdeviceptr a = CUdeviceptr(st[0]), b = CUdeviceptr(dt[0]);
      int h = int(st[1]), w = int(st[2]), H = int(dt[1]), W = int(dt[2]);
      void *dargs[] = {&a, &b, &par_d, &Pi, &ni, &h, &w, &H, &W};
      constexpr int kRows = 4;  // _warp.DENSE_ROWS
      GA_CU(op_, A.cuLaunchKernel(dfn, (W + 31) / 32, (H + 8 * kRows - 1) / (8 * kRows), gz, 256, 1, 1, 0, stream,
                                  dargs, nullptr));
    } else if (packed) {
      if (items > 0)
        GA_CU(op_, A.cuLaunchKernel(function(name), unsigned((items + 255) / 256), gz, 1, 256, 1, 1, 0, stream, args, nullptr));
    } else if (launch_ == "separable") {
      // gpuaug/ops/_launch.py's separable_plan: 32 x 32 tiles; <name>_k<T, C, K> for the batch's
      // largest k <= 15 (K = max(k, 3)), else <name> (all channels per pass) or <name>_1 (one,
      // when all would need over 48 KiB of shared memory); more than 48 KiB is opted into.
      int kmax = 1;
      for (int i = 0; i < n; ++i) kmax = std::max(kmax, int(rows[i][0]));
      std::string sname;
      size_t smem;
      if (kmax <= 15) {
        const int K = std::max(kmax, 3), side = 32 + 2 * (K / 2);
        // uint8 tiles hold floats, rows padded to 4 of them (separable.cuh's separable_tile_k)
        const size_t pitch = es == 1 ? (size_t(side) * C + 3) & ~size_t(3) : size_t(side) * C;
        const size_t tile = (size_t(side) * pitch * (es == 1 ? 4 : es) + 15) & ~size_t(15);
        smem = tile + 4 * size_t(C) * side * 32;
        sname = kernel_ + "_k" + targs + ", " + std::to_string(K) + ">";
      } else {
        const int r = kmax / 2, wlen = (kmax + 6 + 3) & ~3;
        smem = 4 * (size_t(wlen) + size_t(C) * (32 + 2 * r) * 32);
        sname = kernel_ + targs + ">";
        if (smem > 48 * 1024) {
          smem = 4 * (size_t(wlen) + size_t(32 + 2 * r) * 32);
          sname = kernel_ + "_1" + targs + ">";
        }
      }
      CUfunction f = function(sname);
      if (smem > 48 * 1024) GA_CU(op_, A.cuFuncSetAttribute(f, 8, int(smem)));  // MAX_DYNAMIC_SHARED_SIZE_BYTES
      if (hmax > 0 && wmax > 0)
        GA_CU(op_, A.cuLaunchKernel(f, (wmax + 31) / 32, (hmax + 31) / 32, gz, 32, 8, 1, unsigned(smem), stream, args,
                                    nullptr));
    } else if (launch_ != "grid") {
      // gpuaug/ops/_launch.py's rows_grid (replace_rows kernels: erase, salt_and_pepper: 16 bytes'
      // worth of pixels of a row per thread) or gaussian_noise's plan (16 bytes of elements)
      const int oes = type_size(t);
      const int64_t per = 16 / oes;
      long long work = 0;
      for (int i = 0; i < n; ++i) {
        const int64_t h = dt[6 * i + 1], w = dt[6 * i + 2];
        const int64_t units = launch_ == "rows" ? (w + per - 1) / per : (w * C + per - 1) / per;
        work = std::max<long long>(work, h * units);
      }
      if (work > 0)
        GA_CU(op_, A.cuLaunchKernel(function(name), unsigned((work + 255) / 256), gz, 1, 256, 1, 1, 0, stream, args,
                                    nullptr));
    } else if (hmax > 0 && wmax > 0) {
      // one 32 x 8 block per tile_w x tile_h output tile (32 x 8: a thread per pixel; sharpen's
      // 32 x 32 and median_blur's 128 x 8 tiles: several outputs per thread)
      const unsigned gx = (wmax + tile_[0] - 1) / tile_[0], gy = (hmax + tile_[1] - 1) / tile_[1];
      GA_CU(op_, A.cuLaunchKernel(function(name), gx, gy, gz, 32, 8, 1, 0, stream, args, nullptr));
    }
  }

 private:
  static constexpr int kMaxParts = 32;  // gpuaug_host::mean_parts' cap (_colour.MAX_PARTS)
  static constexpr int kMaxNodes = 8;   // argument inputs p0..p7

  // Parameter programs (gpuaug_host.h): one row per sample, errors naming the argument.
  void affine(std::vector<std::vector<float>> *rows, int C, int ti) {
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == 12, op_ + ": argument 'params': sample " + std::to_string(i) + " has " +
                                       std::to_string(r.size()) + " values; the affine program expects 12");
      std::vector<float> o(8 + C);
      double det = 0;
      DALI_ENFORCE(gpuaug_host::affine_row(r.data(), C, ti, o.data(), &det) == 0,
                   op_ + ": argument 'matrix': sample " + std::to_string(i) + " is singular or numerically so "
                   "(determinant " + std::to_string(det) + "); expected an invertible matrix");
      r.swap(o);
    }
  }

  // The DataNode parameters given one argument input each ("p0".. in the order of node_names,
  // as they are: any numeric type, each with its own per-sample shape), checked against the
  // registry's shapes, naming the parameter.
  const dali::TensorList<dali::CPUBackend> &node_input(const dali::Workspace &ws, int k, int n) {
    const std::string name = "p" + std::to_string(k);
    const std::string what = size_t(k) < node_names_.size() ? node_names_[k] : name;
    DALI_ENFORCE(spec_.HasTensorArgument(name), op_ + ": argument '" + what + "': missing (argument input " + name + ")");
    const auto &p = ws.ArgumentInput(name);
    DALI_ENFORCE(p.num_samples() == n, op_ + ": argument '" + what + "': got " + std::to_string(p.num_samples()) +
                                           " samples for a batch of " + std::to_string(n));
    const auto t = p.type();
    DALI_ENFORCE(t == ::DALI_FLOAT || t == ::DALI_FLOAT64 || t == ::DALI_INT32 || t == ::DALI_INT64 ||
                     t == ::DALI_UINT8 || t == ::DALI_INT8 || t == ::DALI_INT16 || t == ::DALI_UINT16 ||
                     t == ::DALI_UINT32 || t == ::DALI_BOOL,
                 op_ + ": argument '" + what + "': got type " + dali::to_string(t) + "; expected numbers");
    return p;
  }

  // Sample i of a parameter input, appended to r as float32 (what fn.cast(FLOAT) would give).
  static void append_values(const dali::TensorList<dali::CPUBackend> &p, int i, int64_t count, std::vector<float> *r) {
    const void *raw = p.raw_tensor(i);
    auto put = [&](auto *v) {
      for (int64_t j = 0; j < count; ++j) r->push_back(static_cast<float>(v[j]));
    };
    switch (p.type()) {
      case ::DALI_FLOAT: put(static_cast<const float *>(raw)); break;
      case ::DALI_FLOAT64: put(static_cast<const double *>(raw)); break;
      case ::DALI_INT32: put(static_cast<const int32_t *>(raw)); break;
      case ::DALI_INT64: put(static_cast<const int64_t *>(raw)); break;
      case ::DALI_UINT8: put(static_cast<const uint8_t *>(raw)); break;
      case ::DALI_INT8: put(static_cast<const int8_t *>(raw)); break;
      case ::DALI_INT16: put(static_cast<const int16_t *>(raw)); break;
      case ::DALI_UINT16: put(static_cast<const uint16_t *>(raw)); break;
      case ::DALI_UINT32: put(static_cast<const uint32_t *>(raw)); break;
      case ::DALI_BOOL: put(static_cast<const bool *>(raw)); break;
      default: break;
    }
  }

  void check_node_shape(int k, int i, const dali::TensorShape<> &shape) {
    size_t e = 0;
    for (int j = 0; j < k && e < node_expect_.size(); ++j) e += 1 + node_expect_[e];
    if (e >= node_expect_.size() || size_t(k) >= node_names_.size()) return;
    const int nd = shape.sample_dim();
    int dims[8] = {0};
    for (int d = 0; d < nd && d < 8; ++d) dims[d] = static_cast<int>(shape[d]);
    const int end = node_expect_[e];
    const int *want = node_expect_.data() + e + 1;
    bool ok;
    if (end == 0) {  // a number: () or (1,)
      ok = nd == 0 || (nd == 1 && dims[0] == 1);
    } else {
      ok = nd == end;
      for (int d = 0; ok && d < nd; ++d) ok = want[d] < 0 || dims[d] == want[d];
    }
    DALI_ENFORCE(ok, op_ + ": argument '" + node_names_[k] + "': sample " + std::to_string(i) + " has shape " +
                         shape_str(dims, std::min(nd, 8)) + "; expected " +
                         (end == 0 ? std::string("a number") : shape_str(want, end)) + " per sample");
  }

  // The rows from 'segments': k > 0 takes the next k constants of 'params', -k the values of
  // argument input p(k-1) -- the row gpuaug.dali used to concatenate in the graph (reshape,
  // cast, constant, cat and fn.shapes per parameter: several DALI CPU operators per op and
  // batch), put together here instead.
  void assemble_rows(const dali::Workspace &ws, int n) {
    if (!const_read_) {
      const_params_ = spec_.GetRepeatedArgument<float>("params");
      const_read_ = true;
    }
    const dali::TensorList<dali::CPUBackend> *nodes[kMaxNodes] = {nullptr};
    for (int k = 0; k < num_nodes_; ++k) nodes[k] = &node_input(ws, k, n);
    for (int i = 0; i < n; ++i) {
      auto &r = rows_[i];
      r.clear();
      size_t c = 0;
      for (int g : segments_) {
        if (g > 0) {
          DALI_ENFORCE(c + g <= const_params_.size(), op_ + ": argument 'segments': more constants than 'params' holds");
          r.insert(r.end(), const_params_.begin() + c, const_params_.begin() + c + g);
          c += g;
        } else {
          const int k = -g - 1;
          const auto &shape = nodes[k]->tensor_shape(i);
          check_node_shape(k, i, shape);
          append_values(*nodes[k], i, shape.num_elements(), &r);
        }
      }
    }
  }

  // Sample i's row as the graph gives it (before dtype columns and programs), for Setup.
  std::vector<float> raw_row(const dali::Workspace &ws, int i, int n) {
    std::vector<float> r;
    if (!const_read_) {
      const_params_ = spec_.GetRepeatedArgument<float>("params");
      const_read_ = true;
    }
    if (!segments_.empty()) {
      size_t c = 0;
      for (int g : segments_) {
        if (g > 0) {
          DALI_ENFORCE(c + g <= const_params_.size(), op_ + ": argument 'segments': more constants than 'params' holds");
          r.insert(r.end(), const_params_.begin() + c, const_params_.begin() + c + g);
          c += g;
        } else {
          const auto &p = node_input(ws, -g - 1, n);
          append_values(p, i, p.tensor_shape(i).num_elements(), &r);
        }
      }
    } else if (spec_.HasTensorArgument("params")) {
      const auto &p = ws.ArgumentInput("params");
      DALI_ENFORCE(p.num_samples() == n && p.type() == ::DALI_FLOAT,
                   op_ + ": argument 'params': expected float32, one row per sample");
      const float *v = p.tensor<float>(i);
      r.assign(v, v + p.tensor_shape(i).num_elements());
    } else {
      r = const_params_;
    }
    return r;
  }

  // rot90's k for sample i (params column 0), checked as gpuaug.rot90 checks it, reduced to 0..3.
  int rot90_k(const dali::Workspace &ws, int i, int n) {
    const auto r = raw_row(ws, i, n);
    DALI_ENFORCE(!r.empty(), op_ + ": argument 'k': expected one number per sample");
    const double k = r[0];
    DALI_ENFORCE(k == std::floor(k) && k >= -3 && k <= 3,
                 op_ + ": argument 'k': got " + std::to_string(k) + " for sample " + std::to_string(i) +
                 "; expected integers in -3..3 (quarter turns counter-clockwise, negative for clockwise)");
    return ((static_cast<int>(k) % 4) + 4) % 4;
  }

  // pad's (top, bottom, left, right) for sample i, checked as gpuaug.pad checks them.
  std::array<int64_t, 4> pad_sides(const dali::Workspace &ws, int i, int n) {
    const auto r = raw_row(ws, i, n);
    DALI_ENFORCE(r.size() == 6, op_ + ": argument 'padding': sample " + std::to_string(i) + " gives " +
                                    std::to_string(r.size() >= 2 ? r.size() - 2 : 0) +
                                    " values; expected (top, bottom, left, right)");
    std::array<int64_t, 4> p;
    for (int k = 0; k < 4; ++k) {
      DALI_ENFORCE(r[k] == std::floor(r[k]) && r[k] >= 0 && r[k] < 1 << 24,
                   op_ + ": argument 'padding': got " + std::to_string(r[k]) + " for sample " + std::to_string(i) +
                   "; expected whole numbers >= 0");
      p[k] = static_cast<int64_t>(r[k]);
    }
    return p;
  }

  // crop's [top, left]: whole numbers, the window inside the image (gpuaug.crop's checks).
  void crop(const dali::TensorList<dali::GPUBackend> &in, std::vector<std::vector<float>> *rows) {
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == 2, op_ + ": arguments 'top' / 'left': sample " + std::to_string(i) +
                                      " gives " + std::to_string(r.size()) + " values; expected one of each");
      const auto s = dims(in.tensor_shape(i));
      const char *names[2] = {"top", "left"}, *dims[2] = {"height", "width"};
      for (int a = 0; a < 2; ++a) {
        const double off = r[a];
        DALI_ENFORCE(off == std::floor(off) && off >= 0,
                     op_ + ": argument '" + names[a] + "': got " + std::to_string(off) + " for sample " +
                     std::to_string(i) + "; expected whole numbers >= 0");
        DALI_ENFORCE(off + out_size_[a] <= s[a],
                     op_ + ": arguments '" + names[a] + "', '" + dims[a] + "': sample " + std::to_string(i) +
                     " has " + names[a] + "=" + std::to_string(int64_t(off)) + " and " + dims[a] + "=" +
                     std::to_string(out_size_[a]) + ", which ends at " + std::to_string(int64_t(off) + out_size_[a]) +
                     ", outside its " + dims[a] + " of " + std::to_string(s[a]) + "; expected a window inside "
                     "the image");
      }
    }
  }

  // gpuaug.ops.resize's resample_params: [top, left, h / out_h, w / out_w, h, w, out_h, out_w,
  // mode, 0, 0, 0] from resize's [mode] (the box: the whole image) or resized_crop's [box (4),
  // mode] (height and width > 0, as gpuaug.resized_crop checks).
  void resample(const dali::TensorList<dali::GPUBackend> &in, std::vector<std::vector<float>> *rows) {
    const bool crop = program_ == "resized_crop";
    const double oh = out_size_[0], ow = out_size_[1];
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == (crop ? 5u : 1u), op_ + ": argument 'boxes': sample " + std::to_string(i) + " gives " +
                                                     std::to_string(r.size() - 1) + " values; expected (top, left, "
                                                     "height, width)");
      const auto s = dims(in.tensor_shape(i));
      double top = 0, left = 0, h = double(s[0]), w = double(s[1]);
      if (crop) {
        top = r[0], left = r[1], h = r[2], w = r[3];
        DALI_ENFORCE(std::isfinite(top) && std::isfinite(left) && std::isfinite(h) && std::isfinite(w) && h > 0 && w > 0,
                     op_ + ": argument 'boxes': sample " + std::to_string(i) + " is (" + std::to_string(top) + ", " +
                     std::to_string(left) + ", " + std::to_string(h) + ", " + std::to_string(w) +
                     "); expected finite (top, left, height, width) with height > 0 and width > 0");
      }
      const float mode = r.back();
      r.assign({float(top), float(left), float(h / oh), float(w / ow), float(h), float(w), float(oh), float(ow), mode,
                0.f, 0.f, 0.f});
    }
  }

  // gpuaug.erase's row: [boxes (K x (top, left, height, width)), value] -> [fill (4: the value as
  // the output stores it, C channels), K, boxes], the boxes whole numbers with sizes >= 0.
  void erase(std::vector<std::vector<float>> *rows, int C, int ti) {
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() >= 1 && (r.size() - 1) % 4 == 0,
                   op_ + ": argument 'boxes': sample " + std::to_string(i) + " gives " +
                   std::to_string(r.size() >= 1 ? r.size() - 1 : 0) + " numbers; expected K x (top, left, height, width)");
      const size_t k = (r.size() - 1) / 4;
      for (size_t j = 0; j < 4 * k; ++j) {
        const double v = r[j];
        DALI_ENFORCE(v == std::floor(v) && std::fabs(v) < 16777216.0 && (j % 4 < 2 || v >= 0),
                     op_ + ": argument 'boxes': sample " + std::to_string(i) + " has " + std::to_string(v) +
                     "; expected whole pixel coordinates (|v| < 2**24) and sizes >= 0");
      }
      const double v = r.back();
      const double stored = ti == 0 ? std::min(255.0, std::max(0.0, std::floor(v + 0.5)))
                                    : ti == 1 ? gpuaug_host::round_half(v) : double(float(v));
      std::vector<float> o(5 + 4 * k, 0.f);
      for (int c = 0; c < C && c < 4; ++c) o[c] = float(stored);
      o[4] = float(k);
      std::copy(r.begin(), r.begin() + 4 * k, o.begin() + 5);
      r.swap(o);
    }
  }

  // The noise ops: batch b of this operator uses the seed + b (as gpuaug.dali's python_function
  // path does), as four 16-bit chunks (exact in float32: gpuaug.ops._launch.seed_columns), and
  // the sample's index; gaussian_noise: [mean, std >= 0, seed (4), index]; salt_and_pepper:
  // [prob, salt_vs_pepper (both in [0, 1]), seed (4), salt, index] -> [floor(prob 2^32) and
  // floor(prob salt_vs_pepper 2^32) as (low 16 bits, rest), seed (4), salt, index].
  void seeded(std::vector<std::vector<float>> *rows) {
    const bool sp = program_ == "salt_pepper";
    const uint64_t b = batches_++;
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == (sp ? 8u : 7u), op_ + ": argument 'params': sample " + std::to_string(i) + " has " +
                                                   std::to_string(r.size()) + " values; expected " + (sp ? "8" : "7"));
      uint64_t seed = 0;
      for (int k = 0; k < 4; ++k) seed |= uint64_t(r[2 + k]) << (16 * k);
      seed += b;
      for (int k = 0; k < 4; ++k) r[2 + k] = float((seed >> (16 * k)) & 0xFFFF);
      r.back() = float(i);
      if (!sp) {
        DALI_ENFORCE(r[1] >= 0.f && std::isfinite(r[1]), op_ + ": argument 'std': got " + std::to_string(r[1]) +
                                                           " for sample " + std::to_string(i) + "; expected >= 0");
        continue;
      }
      const double p = r[0], sv = r[1];
      DALI_ENFORCE(p >= 0 && p <= 1, op_ + ": argument 'prob': got " + std::to_string(p) + " for sample " +
                                         std::to_string(i) + "; expected a probability in [0, 1]");
      DALI_ENFORCE(sv >= 0 && sv <= 1, op_ + ": argument 'salt_vs_pepper': got " + std::to_string(sv) +
                                           " for sample " + std::to_string(i) + "; expected a fraction in [0, 1]");
      const double tn = std::floor(p * 4294967296.0), ts = std::floor(p * sv * 4294967296.0);
      const double ln = std::fmod(tn, 65536.0), ls = std::fmod(ts, 65536.0);
      std::vector<float> o = {float(ln), float((tn - ln) / 65536.0), float(ls), float((ts - ls) / 65536.0),
                              r[2], r[3], r[4], r[5], r[6], r[7]};
      r.swap(o);
    }
  }

  // gpuaug.grid_mask's row: [tile, ratio, angle (degrees), shift (y, x)] -> [cos, sin, shift (2),
  // tile, ratio * tile], every value as the float32 the kernels read (tile > 0 in float32,
  // ratio in [0, 1], as the op checks).
  void grid_mask(std::vector<std::vector<float>> *rows) {
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == 5, op_ + ": argument 'params': sample " + std::to_string(i) + " has " +
                                      std::to_string(r.size()) + " values; expected tile, ratio, angle, shift (2)");
      const float t = r[0];
      DALI_ENFORCE(t > 0.f && std::isfinite(t), op_ + ": argument 'tile': got " + std::to_string(r[0]) +
                                                    " for sample " + std::to_string(i) + "; expected a number > 0");
      DALI_ENFORCE(r[1] >= 0.f && r[1] <= 1.f, op_ + ": argument 'ratio': got " + std::to_string(r[1]) +
                                                   " for sample " + std::to_string(i) + "; expected a number in [0, 1]");
      const double rad = double(r[2]) * (M_PI / 180.0);
      r = {float(std::cos(rad)), float(std::sin(rad)), r[3], r[4], t, float(double(r[1]) * double(t))};
    }
  }

  // box_blur's rows (gpuaug.ops._launch.separable_rows): [k] (odd, 1..255) -> [k, 1/k (k times),
  // 0 up to the batch's largest k].
  void box(std::vector<std::vector<float>> *rows) {
    int kmax = 1;
    for (size_t i = 0; i < rows->size(); ++i) {
      const auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == 1 && r[0] == std::floor(r[0]) && r[0] >= 1 && r[0] <= 255 && int(r[0]) % 2 == 1,
                   op_ + ": argument 'kernel_size': got " + (r.empty() ? std::string("nothing") : std::to_string(r[0])) +
                   " for sample " + std::to_string(i) + "; expected odd sizes from 1 to 255");
      kmax = std::max(kmax, int(r[0]));
    }
    for (auto &r : *rows) {
      const int k = int(r[0]);
      r.assign(1 + kmax, 0.f);
      r[0] = float(k);
      for (int j = 0; j < k; ++j) r[1 + j] = float(1.0 / k);
    }
  }

  void perspective(std::vector<std::vector<float>> *rows, int C, int ti) {
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == 15, op_ + ": argument 'params': sample " + std::to_string(i) + " has " +
                                       std::to_string(r.size()) + " values; the perspective program expects 15");
      std::vector<float> o(11 + C);
      double det = 0;
      DALI_ENFORCE(gpuaug_host::perspective_row(r.data(), C, ti, o.data(), &det) == 0,
                   op_ + ": argument 'matrix': sample " + std::to_string(i) + " is singular or numerically so "
                   "(determinant " + std::to_string(det) + "); expected an invertible matrix");
      r.swap(o);
    }
  }

  void rotation(const dali::TensorList<dali::GPUBackend> &in, std::vector<std::vector<float>> *rows, int C,
                int ti) {
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      DALI_ENFORCE(r.size() == 9, op_ + ": argument 'params': sample " + std::to_string(i) + " has " +
                                      std::to_string(r.size()) + " values; the rotation program expects 9");
      const auto s = dims(in.tensor_shape(i));
      std::vector<float> o(8 + C);
      DALI_ENFORCE(gpuaug_host::rotation_row(r.data(), s[0], s[1], C, ti, o.data()) == 0,
                   op_ + ": argument 'scale': got 0 for sample " + std::to_string(i) +
                   "; expected non-zero numbers (0 collapses the image to a point)");
      r.swap(o);
    }
  }

  // (height, width, channels) of an input sample, in either layout.
  std::array<int64_t, 3> dims(const dali::TensorShape<> &s) const {
    return in_chw_ ? std::array<int64_t, 3>{s[1], s[2], s[0]} : std::array<int64_t, 3>{s[0], s[1], s[2]};
  }

  int out_channels(int c) const { return out_channels_ > 0 ? out_channels_ : pad_output_ && c == 3 ? 4 : c; }

  static std::string shape_str(const int *d, int nd) {
    std::string s = "(";
    for (int k = 0; k < nd; ++k) s += (k ? ", " : "") + (d[k] < 0 ? std::string("C") : std::to_string(d[k]));
    return s + (nd == 1 ? ",)" : ")");
  }

  // Each DataNode parameter's per-sample shape against the registry's (node_shapes: per sample,
  // for every node, ndim then dims), so a wrong shape names the parameter, as gpuaug does.
  void check_node_shapes(const dali::Workspace &ws, int n) {
    if (node_names_.empty() || !spec_.HasTensorArgument("node_shapes")) return;
    const auto &sh = ws.ArgumentInput("node_shapes");
    DALI_ENFORCE(sh.type() == ::DALI_INT32, op_ + ": argument 'node_shapes': expected int32");
    for (int i = 0; i < n && i < sh.num_samples(); ++i) {
      const int *v = sh.tensor<int>(i);
      const int64_t len = sh.tensor_shape(i).num_elements();
      int64_t pos = 0;
      size_t e = 0;
      for (size_t k = 0; k < node_names_.size(); ++k) {
        DALI_ENFORCE(pos < len && e < node_expect_.size(), op_ + ": argument 'node_shapes': too short");
        const int nd = v[pos];
        const int *dims = v + pos + 1;
        const int end = node_expect_[e];
        const int *want = node_expect_.data() + e + 1;
        bool ok;
        if (end == 0) {  // a number: () or (1,)
          ok = nd == 0 || (nd == 1 && dims[0] == 1);
        } else {
          ok = nd == end;
          for (int d = 0; ok && d < nd; ++d) ok = want[d] < 0 || dims[d] == want[d];
        }
        DALI_ENFORCE(ok, op_ + ": argument '" + node_names_[k] + "': sample " + std::to_string(i) + " has shape " +
                             shape_str(dims, nd) + "; expected " + (end == 0 ? std::string("a number") : shape_str(want, end)) +
                             " per sample");
        pos += 1 + nd;
        e += 1 + end;
      }
    }
  }

  // [crop_pos y, x, mirror, mean (k), std (k)], k = 1 or C -> [pos y, x, mirror, 0, 0, mean (C), std (C)]
  // (the two size columns are read by the Numba twins only).
  void cmn(std::vector<std::vector<float>> *rows, int C) {
    for (size_t i = 0; i < rows->size(); ++i) {
      auto &r = (*rows)[i];
      const size_t k = r.size() >= 3 ? (r.size() - 3) / 2 : 0;
      DALI_ENFORCE(r.size() >= 5 && (r.size() - 3) % 2 == 0 && (k == 1 || k == size_t(C)),
                   op_ + ": arguments 'mean' / 'std': sample " + std::to_string(i) + " gives " +
                   std::to_string(r.size() >= 3 ? r.size() - 3 : 0) + " values; expected 1 or " +
                   std::to_string(C) + " (one per channel) for each");
      std::vector<float> o(5 + 2 * C, 0.f);
      o[0] = r[0];
      o[1] = r[1];
      o[2] = r[2];
      for (int c = 0; c < C; ++c) {
        o[5 + c] = r[3 + (k == 1 ? 0 : c)];
        o[5 + C + c] = r[3 + k + (k == 1 ? 0 : c)];
        DALI_ENFORCE(o[5 + C + c] != 0.f, op_ + ": argument 'std': sample " + std::to_string(i) +
                                              " has a zero; expected non-zero numbers");
      }
      r.swap(o);
    }
  }

  static std::string join(const std::vector<int> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s;
  }

  std::string kernel_, signature_, program_, dense_kernel_, out_dtype_, out_layout_, out_shape_,
      in_layout_, launch_;
  bool in_chw_ = false;
  uint64_t batches_ = 0;  // batches run: the noise ops' seed advances by one per batch
  bool pad_output_ = false, cmn_co_ = true;
  std::vector<int> template_extra_, channels_, dtype_cols_, out_size_, node_expect_;
  std::vector<std::string> node_names_;
  std::vector<float> dtype_values_;
  int num_params_ = -1, mean_ = -1, out_channels_ = -1, num_nodes_ = 0;
  std::vector<int> segments_, tile_;
  std::vector<float> const_params_;
  bool const_read_ = false;
  std::vector<std::vector<float>> rows_;  // reused: no per-sample allocations once warm
};


// ---- gpuaug__Chain: several gpuaug__Kernel steps as ONE operator (gd.compose) ---------------
// Each step is a gpuaug__Kernel built from its own OpSpec (the arguments gd's native_node would
// give fn.gpuaug.kernel, sent as text: "step<TAB>name<TAB>value", typed by gpuaug__Kernel's
// schema; "source" is an index into 'sources'; "@pK" maps the step's argument input pK to the
// chain's qJ). Steps run in order on DALI's stream; intermediate batches live in buffers the
// operator keeps (contiguous, stream-ordered, grown when needed); the last step writes the
// operator's output. The kernels, rows and launches are the steps' own, so the result is the
// chain of gd ops (and of the standalone ops) bit for bit, with one DALI operator instead of
// one per op.
static constexpr int kChainInputs = 32;

class Chain : public dali::Operator<dali::GPUBackend> {
 public:
  explicit Chain(const dali::OpSpec &spec) : dali::Operator<dali::GPUBackend>(spec) {
    const auto specs = step_specs(spec.GetRepeatedArgument<std::string>("sources"),
                                  spec.GetRepeatedArgument<std::string>("step_args"), spec.GetArgument<int>("num_steps"),
                                  spec.GetArgument<int>("device_id"), spec.GetArgument<int>("max_batch_size"),
                                  spec.GetArgument<int>("num_threads"), &maps_);
    for (auto &s : specs) steps_.push_back(std::make_unique<Kernel>(s));
    tmp_.resize(specs.size() - 1);
    for (auto &t : tmp_) t = std::make_shared<dali::TensorList<dali::GPUBackend>>();
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const int last = static_cast<int>(steps_.size()) - 1;
    for (int k = 0; k <= last; ++k) {
      auto &sub = workspace(k, ws, nullptr);
      std::vector<dali::OutputDesc> od;
      steps_[k]->SetupImpl(od, sub);
      if (k == last) {
        output_desc = od;
      } else {
        tmp_[k]->set_order(ws.output_order());
        tmp_[k]->Resize(od[0].shape, od[0].type, dali::BatchContiguity::Contiguous);
      }
    }
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    const int last = static_cast<int>(steps_.size()) - 1;
    for (int k = 0; k <= last; ++k) {
      auto &sub = workspace(k, ws, k == last ? &ws.OutputPtr<dali::GPUBackend>(0) : &tmp_[k]);
      steps_[k]->RunImpl(sub);
    }
  }

  // The steps' gpuaug__Kernel specs from the chain's arguments (see above); maps[k]: step k's
  // argument inputs (its pK, the chain's qJ). Public: gpuaug_chain_specs (tests) calls it.
 public:
  static std::vector<dali::OpSpec> step_specs(const std::vector<std::string> &sources,
                                              const std::vector<std::string> &args, int nsteps, int device,
                                              int max_batch, int threads,
                                              std::vector<std::vector<std::pair<std::string, std::string>>> *maps) {
    DALI_ENFORCE(nsteps >= 1, "gpuaug.dali.compose: argument 'num_steps': got " + std::to_string(nsteps) +
                              "; expected at least 1");
    const auto &schema = dali::SchemaRegistry::GetSchema("gpuaug__Kernel");
    std::vector<dali::OpSpec> specs(nsteps, dali::OpSpec("gpuaug__Kernel"));
    maps->assign(nsteps, {});
    for (auto &s : specs) {
      s.AddArg("device_id", device);
      s.AddArg("max_batch_size", max_batch);
      s.AddArg("num_threads", threads);
    }
    for (const auto &line : args) {
      const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
      DALI_ENFORCE(b != std::string::npos, "gpuaug.dali.compose: argument 'step_args': malformed entry '" +
                                             line.substr(0, 80) + "'");
      const int k = std::stoi(line.substr(0, a));
      DALI_ENFORCE(k >= 0 && k < nsteps, "gpuaug.dali.compose: argument 'step_args': step " + std::to_string(k) +
                                         " out of range");
      const std::string name = line.substr(a + 1, b - a - 1), value = line.substr(b + 1);
      auto &s = specs[k];
      if (name == "source") {
        const size_t i = std::stoul(value);
        DALI_ENFORCE(i < sources.size(), "gpuaug.dali.compose: argument 'sources': no source " + value);
        s.AddArg("source", sources[i]);
      } else if (name.size() > 2 && name[0] == '@' && name[1] == 'p') {  // argument input pK <- qJ
        const int j = std::stoi(value);
        DALI_ENFORCE(j >= 0 && j < kChainInputs, "gpuaug.dali.compose: argument input q" + value + " out of range");
        s.AddArgumentInput(name.substr(1), "q" + value);
        (*maps)[k].emplace_back(name.substr(1), "q" + value);
      } else {
        add_typed(&s, schema, name, value);
      }
    }
    return specs;
  }

 private:
  // Step k's workspace: input (the chain's input or the previous step's buffer), output, DALI's
  // stream and the step's argument inputs (the chain's qJ under the step's pK names).
  dali::Workspace &workspace(int k, const dali::Workspace &ws,
                             const std::shared_ptr<dali::TensorList<dali::GPUBackend>> *out) {
    if (subs_.size() < steps_.size()) subs_.resize(steps_.size());
    auto &sub = subs_[k];
    sub.Clear();
    sub.set_output_order(ws.output_order());
    sub.AddInput(k == 0 ? ws.InputPtr<dali::GPUBackend>(0) : tmp_[k - 1]);
    if (out) sub.AddOutput(*out);
    for (const auto &m : maps_[k]) {
      std::shared_ptr<dali::TensorList<dali::CPUBackend>> arg;
      for (int i = 0; i < ws.NumArgumentInput(); ++i)
        if (ws.ArgumentInputName(i) == m.second) arg = ws.ArgumentInputPtr(i);
      DALI_ENFORCE(arg != nullptr, "gpuaug.dali.compose: argument input " + m.second + " is missing");
      sub.AddArgumentInput(m.first, arg);
    }
    return sub;
  }

  // value (text) -> the argument's type in gpuaug__Kernel's schema
  static void add_typed(dali::OpSpec *s, const dali::OpSchema &schema, const std::string &name,
                        const std::string &value) {
    DALI_ENFORCE(schema.HasArgument(name), "gpuaug.dali.compose: gpuaug__Kernel has no argument '" + name + "'");
    std::istringstream in(value);
    switch (schema.GetArgumentType(name)) {
      case ::DALI_STRING:
        s->AddArg(name, value);
        break;
      case ::DALI_INT32:
      case ::DALI_INT64:
        s->AddArg(name, static_cast<int>(std::stol(value)));
        break;
      case ::DALI_FLOAT:
      case ::DALI_FLOAT64:
        s->AddArg(name, static_cast<float>(std::strtod(value.c_str(), nullptr)));
        break;
      case ::DALI_BOOL:
        s->AddArg(name, value == "1" || value == "true" || value == "True");
        break;
      case ::DALI_INT_VEC:
      case ::DALI_INT64_VEC: {
        std::vector<int> v;
        for (std::string t; in >> t;) v.push_back(static_cast<int>(std::stol(t)));
        s->AddArg(name, v);
        break;
      }
      case ::DALI_FLOAT_VEC: {
        std::vector<float> v;
        for (std::string t; in >> t;) v.push_back(static_cast<float>(std::strtod(t.c_str(), nullptr)));
        s->AddArg(name, v);
        break;
      }
      case ::DALI_STRING_VEC: {
        std::vector<std::string> v;
        for (std::string t; in >> t;) v.push_back(t);
        s->AddArg(name, v);
        break;
      }
      default:
        DALI_FAIL("gpuaug.dali.compose: argument '" + name + "' of gpuaug__Kernel has a type the chain cannot pass");
    }
  }

  std::vector<std::unique_ptr<Kernel>> steps_;
  std::vector<std::vector<std::pair<std::string, std::string>>> maps_;
  std::vector<std::shared_ptr<dali::TensorList<dali::GPUBackend>>> tmp_;
  std::vector<dali::Workspace> subs_;
};

// Tests (CPU, no GPU needed): the steps' specs a chain builds, as OpSpec::ToString texts joined
// by "\n----\n", into out (cap bytes); returns the full length, or -1 with the error in out.
extern "C" __attribute__((visibility("default"))) long gpuaug_chain_specs(const char *const *sources, int nsrc,
                                                                         const char *const *args, int nargs,
                                                                         int nsteps, char *out, long cap) {
  std::string text;
  long rc;
  try {
    std::vector<std::vector<std::pair<std::string, std::string>>> maps;
    const auto specs = Chain::step_specs(std::vector<std::string>(sources, sources + nsrc),
                                         std::vector<std::string>(args, args + nargs), nsteps, 0, 1, 1, &maps);
    for (size_t k = 0; k < specs.size(); ++k) text += (k ? "\n----\n" : "") + specs[k].ToString();
    rc = static_cast<long>(text.size());
  } catch (const std::exception &e) {
    text = e.what();
    rc = -1;
  }
  if (cap > 0) {
    const size_t n = std::min<size_t>(text.size(), size_t(cap - 1));
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return rc;
}

// ---- gpuaug__Policy: one fused stage of a gpuaug.Compose -------------------------------------
// The stage's parameter rows are built here per sample (gpuaug_host::policy_row: the composed
// geometry for the image's size, the colour program, the write) from uniforms drawn by the
// policy's own generator (rng_state: NumPy's PCG64, replayed by gpuaug_host::Pcg64, so batch i
// gets the policy's i-th call's parameters) or by the graph (argument input "draws": DALI's
// random operators), then kernels/fused.cu runs as
// gpuaug/policy/_fused.py's launch_cuda does: the contrast mean's reduction first when the
// program has one (gpuaug_gray_sum, packed when it can, or gpuaug_fused_sum), then
// gpuaug_fused_dense (dense HWC batch in, dense HWC / CHW out, colour after geometry) or
// gpuaug_fused (descriptor tables: varshape, anything else).
static std::vector<double> parse_doubles(const std::string &op, const std::string &arg, const std::string &text) {
  std::vector<double> v;
  std::istringstream in(text);
  std::string tok;
  while (in >> tok) {
    char *end = nullptr;
    const double x = std::strtod(tok.c_str(), &end);
    DALI_ENFORCE(end && *end == '\0', op + ": argument '" + arg + "': '" + tok + "' is not a number");
    v.push_back(x);
  }
  return v;
}

class Policy : public Launcher {
 public:
  explicit Policy(const dali::OpSpec &spec) : Launcher(spec) {
    op_ = "gpuaug.dali.policy";
    profile_name_ = "gpuaug_fused";
    source_ = spec.GetArgument<std::string>("source");
    device_ = spec.GetArgument<int>("device_id");
    in_dtype_ = spec.GetArgument<std::string>("input_dtype");
    out_dtype_ = spec.GetArgument<std::string>("out_dtype");
    out_layout_ = spec.GetArgument<std::string>("out_layout");
    pre_ = spec.GetArgument<bool>("pre");
    geo_kind_ = spec.GetArgument<int>("geo_kind");
    border_ = spec.GetArgument<int>("border");
    sum_kind_ = spec.GetArgument<std::string>("sum_kind");
    sum_prog_ = spec.GetArgument<std::string>("sum_prog");
    geo_ = spec.GetRepeatedArgument<int>("geometry");
    colour_ = spec.GetRepeatedArgument<int>("colour");
    expect_codes_ = spec.GetRepeatedArgument<int>("codes");
    geo_args_ = parse_doubles(op_, "geometry_args", spec.GetArgument<std::string>("geometry_args"));
    colour_args_ = parse_doubles(op_, "colour_args", spec.GetArgument<std::string>("colour_args"));
    fill_ = parse_doubles(op_, "fill", spec.GetArgument<std::string>("fill"));
    write_ = parse_doubles(op_, "write", spec.GetArgument<std::string>("write"));
    const auto ins = parse_doubles(op_, "in_scale", spec.GetArgument<std::string>("in_scale"));
    DALI_ENFORCE(ins.size() == 1, op_ + ": argument 'in_scale': expected one number");
    DALI_ENFORCE(write_.size() == 16, op_ + ": argument 'write': expected 16 numbers (scale and bias for 1, 3 "
                 "and 4 channels)");
    DALI_ENFORCE(in_dtype_ == "uint8" || in_dtype_ == "float16" || in_dtype_ == "float32",
                 op_ + ": argument 'input_dtype': got '" + in_dtype_ + "'; expected uint8, float16 or float32");
    DALI_ENFORCE(out_dtype_ == "uint8" || out_dtype_ == "float16" || out_dtype_ == "float32",
                 op_ + ": argument 'out_dtype': got '" + out_dtype_ + "'; expected uint8, float16 or float32");
    DALI_ENFORCE(out_layout_ == "HWC" || out_layout_ == "CHW",
                 op_ + ": argument 'out_layout': got '" + out_layout_ + "'; expected 'HWC' or 'CHW'");
    DALI_ENFORCE(sum_kind_.empty() || sum_kind_ == "gray" || sum_kind_ == "fused",
                 op_ + ": argument 'sum_kind': got '" + sum_kind_ + "'; expected '', 'gray' or 'fused'");
    size_t ga = 0;
    for (int g : geo_) {
      DALI_ENFORCE(g >= gpuaug_host::G_HFLIP && g <= gpuaug_host::G_CENTER_CROP,
                   op_ + ": argument 'geometry': unknown code " + std::to_string(g));
      ga += gpuaug_host::geo_args_of(g);
    }
    size_t ca = 0;
    for (int k : colour_) {
      DALI_ENFORCE(k >= gpuaug_host::K_JITTER && k <= gpuaug_host::K_INVERT && k != gpuaug_host::K_AFFINE,
                   op_ + ": argument 'colour': unknown code " + std::to_string(k));
      ca += gpuaug_host::colour_args_of(k);
    }
    DALI_ENFORCE(ga == geo_args_.size(), op_ + ": argument 'geometry_args': got " + std::to_string(geo_args_.size()) +
                 " numbers; the geometry codes take " + std::to_string(ga));
    DALI_ENFORCE(ca == colour_args_.size(), op_ + ": argument 'colour_args': got " +
                 std::to_string(colour_args_.size()) + " numbers; the colour codes take " + std::to_string(ca));
    plan_.geo = geo_.data();
    plan_.ngeo = static_cast<int>(geo_.size());
    plan_.geo_args = geo_args_.data();
    plan_.colour = colour_.data();
    plan_.ncolour = static_cast<int>(colour_.size());
    plan_.colour_args = colour_args_.data();
    plan_.bilinear = spec.GetArgument<bool>("bilinear");
    plan_.has_fill = !fill_.empty();
    plan_.sem_uint8 = spec.GetArgument<bool>("sem_uint8");
    plan_.fill = fill_.data();
    plan_.nfill = static_cast<int>(fill_.size());
    plan_.in_scale = ins[0];
    plan_.write = write_.data();
    int codes[32];
    const int nc = gpuaug_host::policy_codes(plan_, codes);
    DALI_ENFORCE(nc <= 15, op_ + ": transforms: a fused stage holds at most 15 colour steps; got " + std::to_string(nc));
    DALI_ENFORCE(std::vector<int>(codes, codes + nc) == expect_codes_,
                 op_ + ": argument 'codes': the colour program's steps differ from what the plan gives");
    prog_ = 0;
    for (int k = 0; k < nc; ++k) prog_ |= static_cast<unsigned long long>(codes[k]) << (4 * k);
    P_ = gpuaug_host::policy_row_width(plan_);
    ndraws_ = gpuaug_host::policy_draws(plan_);
    row_slots_ = spec.GetRepeatedArgument<int>("row_slots");
    const std::string st = spec.GetArgument<std::string>("rng_state");
    has_rng_ = !st.empty();
    if (has_rng_) {
      // "<state> <inc>", 32 hex digits each: numpy's PCG64 bit_generator.state
      std::istringstream in(st);
      std::string a, b;
      in >> a >> b;
      auto hex = [&](const std::string &h) {
        DALI_ENFORCE(h.size() == 32 && h.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos,
                     op_ + ": argument 'rng_state': expected two 128-bit numbers as 32 hex digits each; got '" +
                     st + "'");
        return std::make_pair(std::stoull(h.substr(0, 16), nullptr, 16), std::stoull(h.substr(16), nullptr, 16));
      };
      const auto s_ = hex(a), i_ = hex(b);
      rng_.set(s_.first, s_.second, i_.first, i_.second);
      for (int r : row_slots_)
        DALI_ENFORCE(r >= -1 && r < ndraws_, op_ + ": argument 'row_slots': got " + std::to_string(r) +
                                             "; expected -1 or a draw index below " + std::to_string(ndraws_));
    }
  }

 protected:
  bool SetupImpl(std::vector<dali::OutputDesc> &output_desc, const dali::Workspace &ws) override {
    const auto &in = ws.Input<dali::GPUBackend>(0);
    const DALIDataType t = in.type();
    DALI_ENFORCE(ctype(t) != nullptr, op_ + ": x: got dtype " + dali::to_string(t) +
                                          "; expected one of uint8, float16, float32");
    DALI_ENFORCE(dtype_name(t) == in_dtype_,
                 op_ + ": argument 'input_dtype': got '" + in_dtype_ + "' but the images are " + dtype_name(t) +
                 "; the policy is planned for its input dtype (pass input_dtype='" + dtype_name(t) + "')");
    DALI_ENFORCE(in.sample_dim() == 3, op_ + ": x: got " + std::to_string(in.sample_dim()) +
                                           "-D samples; expected HWC images (3-D)");
    const auto &layout = in.GetLayout();
    DALI_ENFORCE(layout.empty() || layout == "HWC",
                 op_ + ": input 'data': got layout '" + layout.str() + "'; the native policy takes HWC "
                 "(use backend='cuda' for CHW)");
    const int n = in.num_samples();
    output_desc.resize(1);
    output_desc[0].shape = in.shape();
    for (int i = 0; i < n; ++i) {
      const auto &s = in.tensor_shape(i);
      DALI_ENFORCE(s[2] == 1 || s[2] == 3 || s[2] == 4, op_ + ": x: got " + std::to_string(s[2]) +
                                                            " channels (sample " + std::to_string(i) +
                                                            "); expected 1, 3 or 4");
      DALI_ENFORCE(s[2] == in.tensor_shape(0)[2], op_ + ": x: sample " + std::to_string(i) + " has " +
                                                      std::to_string(s[2]) + " channels, sample 0 " +
                                                      std::to_string(in.tensor_shape(0)[2]) +
                                                      "; expected one channel count for the batch");
      int64_t oh, ow;
      gpuaug_host::policy_out_size(plan_, s[0], s[1], &oh, &ow);
      DALI_ENFORCE(s[0] * s[1] * s[2] <= 2147483647LL && oh * ow * s[2] <= 2147483647LL,
                   op_ + ": x: sample " + std::to_string(i) + " holds over 2**31 - 1 elements");
      output_desc[0].shape.set_tensor_shape(i, out_layout_ == "CHW" ? dali::TensorShape<>{s[2], oh, ow}
                                                                   : dali::TensorShape<>{oh, ow, s[2]});
    }
    output_desc[0].type = out_dtype_ == "uint8" ? ::DALI_UINT8 : out_dtype_ == "float16" ? ::DALI_FLOAT16 : ::DALI_FLOAT;
    return true;
  }

  void RunImpl(dali::Workspace &ws) override {
    begin_run();
    auto &A = api();
    const auto &in = ws.Input<dali::GPUBackend>(0);
    auto &out = ws.Output<dali::GPUBackend>(0);
    out.SetLayout(out_layout_);
    const int n = in.num_samples();
    if (n == 0) return;
    const DALIDataType t = in.type();
    const int C = static_cast<int>(in.tensor_shape(0)[2]);
    CUstream stream = reinterpret_cast<CUstream>(ws.stream());
    // The draws, ndraws_ doubles per sample, in the plan's order: from the policy's own generator
    // (rng_state: the same numbers its i-th call would draw, for batch i), or a float32 vector
    // per sample from the graph (argument input 'draws'), or one constant vector.
    draws_.assign(size_t(std::max<int64_t>(1, int64_t(n) * ndraws_)), 0.0);
    if (spec_.HasTensorArgument("draws")) {
      const auto &dl = ws.ArgumentInput("draws");
      DALI_ENFORCE(dl.num_samples() == n, op_ + ": argument 'draws': got " + std::to_string(dl.num_samples()) +
                                              " samples for a batch of " + std::to_string(n));
      DALI_ENFORCE(dl.type() == ::DALI_FLOAT, op_ + ": argument 'draws': got type " + dali::to_string(dl.type()) +
                                                  "; expected float32");
      for (int i = 0; i < n; ++i) {
        const int64_t k = dl.tensor_shape(i).num_elements();
        DALI_ENFORCE(k == ndraws_, op_ + ": argument 'draws': sample " + std::to_string(i) + " has " +
                                       std::to_string(k) + " values; expected " + std::to_string(ndraws_));
        const float *v = dl.tensor<float>(i);
        for (int64_t j = 0; j < k; ++j) draws_[size_t(i) * ndraws_ + j] = v[j];
      }
    } else if (has_rng_) {
      gpuaug_host::policy_draws(rng_, row_slots_.data(), static_cast<int>(row_slots_.size()), n,
                                static_cast<int>(ndraws_), draws_.data());
    } else {
      if (!const_read_) {
        const_draws_ = spec_.GetRepeatedArgument<float>("draws");
        const_read_ = true;
      }
      DALI_ENFORCE(int64_t(const_draws_.size()) == ndraws_,
                   op_ + ": argument 'draws': got " + std::to_string(const_draws_.size()) + " values; expected " +
                   std::to_string(ndraws_));
      for (int i = 0; i < n; ++i)
        for (int64_t j = 0; j < ndraws_; ++j) draws_[size_t(i) * ndraws_ + j] = const_draws_[j];
    }

    const size_t tab_bytes = size_t(n) * 6 * sizeof(int64_t);
    const size_t par_off = 2 * tab_bytes;
    const size_t total = par_off + size_t(n) * P_ * sizeof(float);
    const size_t part_off = (total + 7) / 8 * 8;
    const size_t part_max = sum_kind_.empty() ? 0 : size_t(n) * 32 * sizeof(double);
    int slot;
    CUdeviceptr dev = 0;
    char *host = static_cast<char *>(staging_.get(op_, part_off + part_max, &slot, &dev));
    int64_t *st = reinterpret_cast<int64_t *>(host), *dt = st + 6 * n;
    float *par = reinterpret_cast<float *>(host + par_off);
    const int es = type_size(t);
    const int oes = out_dtype_ == "uint8" ? 1 : out_dtype_ == "float16" ? 2 : 4;
    const bool chw = out_layout_ == "CHW";
    int hmax = 0, wmax = 0;
    bool dense = !pre_;
    for (int i = 0; i < n; ++i) {
      const auto &s = in.tensor_shape(i);
      const int64_t h = s[0], w = s[1];
      const int rc = gpuaug_host::policy_row(plan_, draws_.data() + size_t(i) * ndraws_, h, w, C,
                                             par + size_t(i) * P_, P_);
      DALI_ENFORCE(rc != 1, op_ + ": transforms: a sampled geometry is singular (sample " + std::to_string(i) +
                                "; e.g. a zero scale); check the transforms' ranges");
      DALI_ENFORCE(rc != 2, op_ + ": fill: got " + std::to_string(fill_.size()) + " values; the images have " +
                                std::to_string(C) + " channels (give 1 or " + std::to_string(C) + ")");
      DALI_ENFORCE(rc != 3, op_ + ": Normalize: mean / std: their number of values does not fit images of " +
                                std::to_string(C) + " channels (give 1 or " + std::to_string(C) + ")");
      DALI_ENFORCE(rc != 4, op_ + ": transforms: a fused stage's parameter row is wider than 15 colour steps");
      int64_t src[6] = {int64_t(reinterpret_cast<uintptr_t>(in.raw_tensor(i))), h, w, w * C, C, 1};
      const auto &os = out.tensor_shape(i);
      const int64_t oh = chw ? os[1] : os[0], ow = chw ? os[2] : os[1];
      int64_t dst[6] = {int64_t(reinterpret_cast<uintptr_t>(out.raw_mutable_tensor(i))), oh, ow,
                        chw ? ow : ow * C, chw ? 1 : C, chw ? oh * ow : 1};
      std::memcpy(st + 6 * i, src, sizeof(src));
      std::memcpy(dt + 6 * i, dst, sizeof(dst));
      hmax = std::max<int>(hmax, int(oh));
      wmax = std::max<int>(wmax, int(ow));
      // _fused._dense: every sample h x w x C back to back, in and out
      dense = dense && h == st[1] && w == st[2] && oh == dt[1] && ow == dt[2] &&
              src[0] == st[0] + int64_t(i) * h * w * C * es && dst[0] == dt[0] + int64_t(i) * oh * ow * C * oes;
    }
    dump(n, C, st, par, dense);
    Release release{this, slot, stream};
    GA_CU(op_, A.cuMemcpyHtoDAsync(dev, host, total, stream));

    const std::string T = ctype(t), Cs = std::to_string(C);
    const std::string O = out_dtype_ == "uint8" ? "unsigned char" : out_dtype_ == "float16" ? "gpuaug::half" : "float";
    const std::string semi = plan_.sem_uint8 ? "true" : "false";
    CUdeviceptr src_t = dev, dst_t = dev + tab_bytes, par_d = dev + par_off;
    int Pi = P_, ni = n;
    CUdeviceptr partials = 0;
    int nparts = 0;
    const unsigned gz = std::min(n, 65535);
    if (!sum_kind_.empty()) {
      partials = dev + part_off;
      if (sum_kind_ == "gray") {
        long long items = 0;
        const bool packed = gpuaug_host::packed_layout(st, nullptr, n, C, C, es, &items);
        if (!packed) {
          items = 0;
          for (int i = 0; i < n; ++i) items = std::max<long long>(items, st[6 * i + 1] * st[6 * i + 2]);
        }
        nparts = gpuaug_host::mean_parts(sms(), n, items);
        CUfunction f = function(std::string("gpuaug_gray_sum") + (packed ? "_packed" : "") + "<" + T + ", " + Cs + ", 1>");
        int bcol = gpuaug_host::F_COLOUR;
        void *args[] = {&src_t, &par_d, &Pi, &ni, &bcol, &partials, &nparts};
        GA_CU(op_, A.cuLaunchKernel(f, nparts, gz, 1, 256, 1, 1, 0, stream, args, nullptr));
      } else {
        long long items = 0;
        for (int i = 0; i < n; ++i) items = std::max<long long>(items, st[6 * i + 1] * st[6 * i + 2]);
        nparts = gpuaug_host::mean_parts(sms(), n, items);
        CUfunction f = function("gpuaug_fused_sum<" + T + ", " + Cs + ", " + semi + ", " + sum_prog_ + "ull>");
        void *args[] = {&src_t, &par_d, &Pi, &ni, &partials, &nparts};
        GA_CU(op_, A.cuLaunchKernel(f, nparts, gz, 1, 256, 1, 1, 0, stream, args, nullptr));
      }
    }
    const std::string prog = std::to_string(prog_) + "ull";
    const std::string mid = Cs + ", " + O + ", " + semi + ", " + std::to_string(geo_kind_) + ", " +
                            std::to_string(border_) + ", ";
    if (dense) {
      CUfunction f = function("gpuaug_fused_dense<" + T + ", " + mid + prog + ", " + (chw ? "true" : "false") + ">");
      CUdeviceptr a = CUdeviceptr(st[0]), b = CUdeviceptr(dt[0]);
      int h = int(st[1]), w = int(st[2]), H = int(dt[1]), W = int(dt[2]);
      void *args[] = {&a, &b, &par_d, &Pi, &ni, &h, &w, &H, &W, &partials, &nparts};
      constexpr int kRows = 4;  // GPUAUG_FUSED_ROWS
      if (H > 0 && W > 0)
        GA_CU(op_, A.cuLaunchKernel(f, (W + 31) / 32, (H + 8 * kRows - 1) / (8 * kRows), gz, 256, 1, 1, 0, stream,
                                    args, nullptr));
    } else if (hmax > 0 && wmax > 0) {
      CUfunction f = function("gpuaug_fused<" + T + ", " + mid + (pre_ ? "true" : "false") + ", " + prog + ">");
      void *args[] = {&src_t, &dst_t, &par_d, &Pi, &ni, &partials, &nparts};
      GA_CU(op_, A.cuLaunchKernel(f, (wmax + 31) / 32, std::min((hmax + 7) / 8, 65535), gz, 256, 1, 1, 0, stream,
                                  args, nullptr));
    }
  }

 private:
  // GPUAUG_DALI_POLICY_DUMP=<dir>: the first 4 batches' draws, descriptor tables and parameter
  // rows as text, <dir>/policy_<instance>_<batch>.txt (tests/gpu/dali_policy_debug.py reads them).
  void dump(int n, int C, const int64_t *st, const float *par, bool dense) {
    static const char *dir = getenv("GPUAUG_DALI_POLICY_DUMP");
    const uint64_t b = batches_++;
    if (!dir || !*dir || b >= 4) return;
    char name[64];
    snprintf(name, sizeof(name), "/policy_%p_%llu.txt", static_cast<void *>(this), static_cast<unsigned long long>(b));
    // stdio, not iostreams: the plugin may be built with a newer g++ than the libstdc++ the
    // process loads, and iostream's locale machinery crashed there (an H100 run, session 5)
    FILE *f = std::fopen((std::string(dir) + name).c_str(), "w");
    if (!f) return;
    std::fprintf(f, "n %d C %d P %d draws %lld rng %d dense %d sum %s\n", n, C, P_, static_cast<long long>(ndraws_),
                 has_rng_ ? 1 : 0, dense ? 1 : 0, sum_kind_.empty() ? "-" : sum_kind_.c_str());
    for (int i = 0; i < n; ++i) {
      std::fprintf(f, "sample %d src", i);
      for (int k = 0; k < 6; ++k) std::fprintf(f, " %lld", static_cast<long long>(st[6 * i + k]));
      std::fprintf(f, "\ndraws");
      for (int64_t k = 0; k < ndraws_; ++k) std::fprintf(f, " %.17g", draws_[size_t(i) * ndraws_ + k]);
      std::fprintf(f, "\nrow");
      for (int k = 0; k < P_; ++k) std::fprintf(f, " %.9g", static_cast<double>(par[size_t(i) * P_ + k]));
      std::fprintf(f, "\n");
    }
    std::fclose(f);
  }

  static std::string dtype_name(DALIDataType t) {
    return t == ::DALI_UINT8 ? "uint8" : t == ::DALI_FLOAT16 ? "float16" : t == ::DALI_FLOAT ? "float32"
                                                                                                : dali::to_string(t);
  }

  std::string in_dtype_, out_dtype_, out_layout_, sum_kind_, sum_prog_;
  bool pre_ = false, const_read_ = false;
  int geo_kind_ = 0, border_ = 1, P_ = 0;
  int64_t ndraws_ = 0;
  unsigned long long prog_ = 0;
  std::vector<int> geo_, colour_, expect_codes_;
  std::vector<double> geo_args_, colour_args_, fill_, write_;
  std::vector<float> const_draws_;
  std::vector<double> draws_;  // this batch's draws (reused)
  std::vector<int> row_slots_;
  bool has_rng_ = false;
  uint64_t batches_ = 0;
  gpuaug_host::Pcg64 rng_;  // the policy's generator, advanced once per batch
  gpuaug_host::PolicyPlan plan_;
};

}  // namespace gpuaug_dali

DALI_REGISTER_OPERATOR(gpuaug__Kernel, ::gpuaug_dali::Kernel, dali::GPU);

DALI_SCHEMA(gpuaug__Kernel)
    .DocStr(R"(Runs one gpuaug CUDA C kernel over a batch of HWC (or CHW) images, once per batch, on DALI's
stream (the operator behind gpuaug.dali's native path; see gpuaug/dali/native/gpuaug_dali.cc).)")
    .NumInput(1)
    .NumOutput(1)
    .InputLayout(0, {"HWC", "CHW"})
    .AddOptionalArg("in_layout", "The images' layout: 'HWC' or 'CHW' (descriptor tables: the kernels read "
                    "either).", std::string("HWC"))
    .AddArg("op", "The gpuaug op's name (for error messages).", ::DALI_STRING)
    .AddArg("source", "The kernel's CUDA C source, headers inlined (compiled with NVRTC at run time).",
            ::DALI_STRING)
    .AddArg("kernel", "The kernel template's name; instantiated as name<T, C, template_extra...>.",
            ::DALI_STRING)
    .AddOptionalArg("template_extra", "Extra int template arguments after <T, C>.", std::vector<int>{})
    .AddOptionalArg("channels", "Accepted channel counts.", std::vector<int>{1, 3, 4})
    .AddOptionalArg("signature", "'generic' (src, dst, params, P, n), 'colour' (+ partials, nparts), 'cmn' or "
                    "'equalize' (histograms and lookup tables first).",
                    std::string("generic"))
    .AddOptionalArg("program", "'identity', 'rotation', 'affine', 'perspective' or 'cmn': how a sample's "
                    "params become its kernel row.",
                    std::string("identity"))
    .AddOptionalArg("dtype_cols", "Parameter columns set from the images' dtype (see dtype_values).",
                    std::vector<int>{})
    .AddOptionalArg("dtype_values", "Per dtype_cols entry: its value for uint8, float16, float32.",
                    std::vector<float>{})
    .AddOptionalArg("out_size", "Warps: the output (height, width) of every sample; empty: the input's.",
                    std::vector<int>{})
    .AddOptionalArg("out_dtype", "signature 'cmn': output dtype, 'float32' or 'float16'.", std::string(""))
    .AddOptionalArg("out_layout", "signature 'cmn': output layout, 'HWC' or 'CHW'.", std::string("HWC"))
    .AddOptionalArg("cmn_co", "signature 'cmn': the kernels take the output channel count as their 4th "
                    "template argument (crop_mirror_normalize; normalize's do not).", true)
    .AddOptionalArg("pad_output", "signature 'cmn': a 4th channel of zeros for 3-channel images.", false)
    .AddOptionalArg("out_channels", "Colour kernels taking the output channel count as a template argument "
                    "(grayscale): 1 or 3; -1: the input's.", -1)
    .AddOptionalArg("out_shape", "'same' (the input's or out_size), 'swap' (width x height: transpose), "
                    "'rot90' (swapped where the sample's k, params column 0, is odd) or 'pad' (grown by the "
                    "sample's (top, bottom, left, right), params columns 0-3).", std::string("same"))
    .AddOptionalArg("dense_kernel", "Warp ops: the kernel for C-contiguous uniform batches "
                    "(name<T, C, extra...>(src, dst, params, P, n, h, w, H, W)); empty: none.", std::string(""))
    .AddOptionalArg("mean", "Colour ops: -1 none, else the grayscale mean is reduced first "
                    "(gpuaug_gray_sum<T, C, mean>; 1: brightness column 0 applies before).", -1)
    .AddOptionalArg("num_params", "Values per sample in params (-1: any).", -1)
    .AddOptionalArg("node_names", "The DataNode parameters, in the order of node_shapes.", std::vector<std::string>{})
    .AddOptionalArg("node_expect", "Per node: ndim, then dims (-1: the channel count).", std::vector<int>{})
    .AddOptionalArg("node_shapes", "Per sample: for each node, ndim then dims (fn.shapes).", std::vector<int>{}, true)
    .AddOptionalArg("params", "Per-sample float32 parameter vector (or one constant vector; with 'segments': "
                    "the constants).", std::vector<float>{}, true)
    .AddOptionalArg("launch", "'grid' (2-D tiles, see tile), 'rows' (replace_rows kernels: 16 bytes of a row "
                    "per thread) or 'noise' (gaussian_noise: 16 bytes of elements per thread).", std::string("grid"))
    .AddOptionalArg("tile", "Generic launches: output pixels (width, height) per 32 x 8 block.", std::vector<int>{32, 8})
    .AddOptionalArg("segments", "The row, in order: k > 0 takes the next k constants of 'params', -k the values "
                    "of argument input p(k-1). Empty: 'params' is the row.", std::vector<int>{})
    .AddOptionalArg("p0", "DataNode parameter 0 (any numeric type, its own per-sample shape).", std::vector<float>{},
                    true)
    .AddOptionalArg("p1", "DataNode parameter 1.", std::vector<float>{}, true)
    .AddOptionalArg("p2", "DataNode parameter 2.", std::vector<float>{}, true)
    .AddOptionalArg("p3", "DataNode parameter 3.", std::vector<float>{}, true)
    .AddOptionalArg("p4", "DataNode parameter 4.", std::vector<float>{}, true)
    .AddOptionalArg("p5", "DataNode parameter 5.", std::vector<float>{}, true)
    .AddOptionalArg("p6", "DataNode parameter 6.", std::vector<float>{}, true)
    .AddOptionalArg("p7", "DataNode parameter 7.", std::vector<float>{}, true);

DALI_REGISTER_OPERATOR(gpuaug__Policy, ::gpuaug_dali::Policy, dali::GPU);

DALI_SCHEMA(gpuaug__Policy)
    .DocStr(R"(Runs one fused stage of a gpuaug.Compose (kernels/fused.cu) over a batch of HWC images,
once per batch, on DALI's stream; the per-sample parameter rows are built from uniforms (the
policy's own generator, "rng_state", or values the graph drew, "draws") and each image's size
(the operator behind gpuaug.dali.policy's native path).)")
    .NumInput(1)
    .NumOutput(1)
    .InputLayout(0, {"HWC"})
    .AddArg("source", "kernels/fused.cu with its headers inlined (compiled with NVRTC at run time).", ::DALI_STRING)
    .AddOptionalArg("input_dtype", "The images' dtype the stage was planned for.", std::string("uint8"))
    .AddOptionalArg("out_dtype", "Output dtype: uint8, float16 or float32.", std::string("uint8"))
    .AddOptionalArg("out_layout", "Output layout: HWC or CHW.", std::string("HWC"))
    .AddOptionalArg("sem_uint8", "The stage works in uint8 semantics (else [0, 1] floats).", true)
    .AddOptionalArg("pre", "The colour program runs before the geometry (on the source taps).", false)
    .AddOptionalArg("bilinear", "Some geometric transform interpolates bilinearly.", false)
    .AddOptionalArg("geo_kind", "0 no geometry, 1 affine, 2 perspective.", 0)
    .AddOptionalArg("border", "0 constant (with fill), 1 replicate.", 1)
    .AddOptionalArg("sum_kind", "The contrast mean's reduction: '' none, 'gray' (gpuaug_gray_sum), 'fused' "
                    "(gpuaug_fused_sum).", std::string(""))
    .AddOptionalArg("sum_prog", "gpuaug_fused_sum's program (decimal).", std::string("0"))
    .AddOptionalArg("geometry", "Geometry codes (gpuaug_host.h).", std::vector<int>{})
    .AddOptionalArg("geometry_args", "Their constants, as text (doubles).", std::string(""))
    .AddOptionalArg("colour", "Colour codes (gpuaug_host.h).", std::vector<int>{})
    .AddOptionalArg("colour_args", "Their constants, as text (doubles).", std::string(""))
    .AddOptionalArg("codes", "The colour program's steps the plan expects (a check).", std::vector<int>{})
    .AddOptionalArg("fill", "Fill per channel (1 or C values, text), empty: no fill.", std::string(""))
    .AddOptionalArg("write", "Write scale and bias for 1, 3 and 4 channels (16 numbers, text; nan: none).",
                    std::string(""))
    .AddOptionalArg("in_scale", "Semantic units per source unit (text).", std::string("1"))
    .AddOptionalArg("draws", "Per-sample float32 values drawn by the graph, in the plan's order (instead of "
                    "rng_state).", std::vector<float>{}, true)
    .AddOptionalArg("rng_state", "The policy's generator (numpy PCG64 state and increment, 32 hex digits "
                    "each) when the pipeline was defined: batch i draws what the policy's i-th call would.",
                    std::string(""))
    .AddOptionalArg("row_slots", "Per row of n uniforms the policy's call consumes (every transform's "
                    "rng.random rows, in order): the draw index it fills, -1 for another stage's.",
                    std::vector<int>{});

DALI_REGISTER_OPERATOR(gpuaug__Chain, ::gpuaug_dali::Chain, dali::GPU);

DALI_SCHEMA(gpuaug__Chain)
    .DocStr(R"(Runs several gpuaug__Kernel steps (the native ops of a gd.compose) as one operator, in
order, on DALI's stream (the operator behind gpuaug.dali.compose's native chain).)")
    .NumInput(1)
    .NumOutput(1)
    .InputLayout(0, {"HWC", "CHW"})
    .AddArg("num_steps", "The number of steps.", ::DALI_INT32)
    .AddArg("sources", "The steps' kernel sources (CUDA C, headers inlined), each once.", ::DALI_STRING_VEC)
    .AddArg("step_args", "The steps' gpuaug__Kernel arguments, one entry each: 'step<TAB>name<TAB>value' "
            "(vectors space-separated; 'source': an index into sources; '@pK': argument input qJ).",
            ::DALI_STRING_VEC)
    .AddOptionalArg("q0", "Argument input 0 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q1", "Argument input 1 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q2", "Argument input 2 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q3", "Argument input 3 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q4", "Argument input 4 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q5", "Argument input 5 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q6", "Argument input 6 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q7", "Argument input 7 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q8", "Argument input 8 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q9", "Argument input 9 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q10", "Argument input 10 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q11", "Argument input 11 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q12", "Argument input 12 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q13", "Argument input 13 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q14", "Argument input 14 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q15", "Argument input 15 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q16", "Argument input 16 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q17", "Argument input 17 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q18", "Argument input 18 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q19", "Argument input 19 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q20", "Argument input 20 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q21", "Argument input 21 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q22", "Argument input 22 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q23", "Argument input 23 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q24", "Argument input 24 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q25", "Argument input 25 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q26", "Argument input 26 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q27", "Argument input 27 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q28", "Argument input 28 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q29", "Argument input 29 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q30", "Argument input 30 of the steps.", std::vector<float>{}, true)
    .AddOptionalArg("q31", "Argument input 31 of the steps.", std::vector<float>{}, true);
