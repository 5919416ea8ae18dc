"""The stage at which a context on GPU 0 appeared (if any), from the placement probes' JSON in
the log of tests/test_multi_gpu.py:

    python3 tests/gpu/multi_gpu_placement.py OUT/test_multi_gpu.txt
"""
import json, re, sys
text = open(sys.argv[1]).read()
for m in re.finditer(r'^\{\n "variant".*?^\}', text, re.S | re.M):
    r = json.loads(m.group(0))
    first = next((s for s, c in r["stages"] if 0 in c), None)
    print(f"    placement probe '{r['variant']}': contexts {r['stages'][-1][1]} at the end; first context on "
          f"GPU 0 at: {first}; nvidia-smi lists the pid on GPUs {r['nvidia_smi_gpus_of_pid']}")
