#!/usr/bin/env bash
# One command on a fresh machine: install shardkit, generate a demo segmentation dataset,
# build augmented TFRecord shards from it, and read them back with TensorFlow.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
rm -rf demo
.venv/bin/python -c "from shardkit import demo; demo.make_segmentation('demo/data', train=400, val=100)"
echo "demo dataset: $(ls demo/data/images | wc -l) images + masks, index files: $(cd demo/data && ls *.txt | tr '\n' ' ')"
.venv/bin/shardkit build demo/data -o demo/out -c configs/camvid-segmentation.yaml --seed 1 --progress
echo "resuming the finished build is a no-op:"
.venv/bin/shardkit build demo/data -o demo/out -c configs/camvid-segmentation.yaml --seed 1
.venv/bin/python scripts/read_back.py demo/out  # quiet about CUDA on a machine without a GPU: the script sees to it
