#!/usr/bin/env bash
# A SLURM array job: each array task builds its deterministic share of one global plan into the
# shared output folder. shardkit reads SLURM_ARRAY_TASK_COUNT and SLURM_ARRAY_TASK_ID (minus
# SLURM_ARRAY_TASK_MIN) itself, so --num-nodes/--node-index need not be passed. A pre-empted or
# failed task is resubmitted as is: it resumes its share. The last task to finish writes the
# manifest; `shardkit finalize OUT` does it by hand.
#
#   sbatch --array=0-7 scripts/slurm-build.sh /shared/data /shared/shards configs/camvid-segmentation.yaml
#
#SBATCH --job-name=shardkit-build
#SBATCH --cpus-per-task=32
#SBATCH --mem=64G
#SBATCH --time=04:00:00
#SBATCH --requeue
set -euo pipefail
DATA=${1:?index files or folder}
OUT=${2:?output folder on a filesystem every node sees}
CONFIG=${3:?config YAML}
# Every task must get the same inputs, config and parameters (a task that differs is refused).
# Pass --records-per-shard so the plan does not depend on the first task's core count.
shardkit build "$DATA" -o "$OUT" -c "$CONFIG" --seed 0 --records-per-shard 1000 \
  --workers "${SLURM_CPUS_PER_TASK:-$(nproc)}" --progress
