"""Write the end-to-end issue's synthetic JPEG folder (examples/ddp_train.write_folder: 8
classes, 375 x 500 images, seed 0) and say how long it took; tests/gpu/multi_gpu.sh runs it
in the background while its tests run.

    python3 tests/gpu/write_folder.py FOLDER N
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "examples"))
import ddp_train as d  # noqa: E402


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: python3 tests/gpu/write_folder.py FOLDER N")
    folder, n = argv[0], int(argv[1])
    t = time.perf_counter()
    d.write_folder(folder, n, 8, seed=0, shape=(375, 500))
    print(f"wrote {n} JPEGs in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
