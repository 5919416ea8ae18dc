"""Write the end-to-end issue's synthetic JPEG folder (gpuaug.bench.ddp.write_folder: 8
classes, 375 x 500 images, seed 0) and say how long it took; tests/gpu/multi_gpu.sh runs it
in the background while its tests run.

    python3 tests/gpu/write_folder.py FOLDER N
"""
import sys
import time

from gpuaug.bench import ddp as d


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: python3 tests/gpu/write_folder.py FOLDER N")
    folder, n = argv[0], int(argv[1])
    t = time.perf_counter()
    d.write_folder(folder, n, 8, seed=0, shape=(375, 500))
    print(f"wrote {n} JPEGs in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
