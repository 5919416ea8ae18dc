set -uo pipefail
BUDGET_S=100
source tests/gpu/stage.sh
export PYTHONPATH=$PWD/tests/gpu:$PYTHONPATH
stage hostfloor 90 python3 tests/gpu/hostfloor.py
cat $OUT/hostfloor.txt
